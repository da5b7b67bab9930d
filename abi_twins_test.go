package mandate_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/sandbox"
)

// The host calls are declared once, beside their implementations
// (kernel.HostCalls: names, parameters and errnos). These tests check
// their twins against the declarations: the guest SDKs' imports (Go, C,
// Rust) and guest-sdk/ABI.md.

// twin renders a declaration's parameters as a twin writes them: by kind
// (each parameter's type in a language), by name, or both.
func twin(f func(p sandbox.Param) string) map[string][]string {
	want := map[string][]string{}
	for _, hc := range kernel.HostCalls() {
		ps := []string{}
		for _, p := range hc.Params {
			ps = append(ps, f(p))
		}
		want[hc.Name] = ps
	}
	return want
}

// hostCallOrder is the declarations' order.
func hostCallOrder() []string {
	var names []string
	for _, hc := range kernel.HostCalls() {
		names = append(names, hc.Name)
	}
	return names
}

// goType is the type of a parameter in the Go SDK's imports.
func goType(p sandbox.Param) string {
	switch p.Kind {
	case sandbox.In, sandbox.Buf:
		return "unsafe.Pointer"
	case sandbox.Out:
		return "*uint32"
	}
	return "uint32"
}

// TestHostCallTwins checks the Go SDK's //go:wasmimport declarations (each
// parameter's type follows its kind: a pointer the kernel reads or fills
// is an unsafe.Pointer, an out pointer a *uint32, anything else a uint32),
// and that the functions outside wasip1 have the same signatures.
func TestHostCallTwins(t *testing.T) {
	const where = "guest-sdk/hostcalls_wasip1.go"
	sdk, byFunc := goFuncs(t, where, true)
	compareCalls(t, where, sdk, twin(goType))

	other, _ := goFuncs(t, "guest-sdk/hostcalls_other.go", false)
	for fn, sig := range byFunc {
		if got, ok := other[fn]; !ok {
			t.Errorf("guest-sdk/hostcalls_other.go: no %s", fn)
		} else if !slices.Equal(got, sig) {
			t.Errorf("guest-sdk/hostcalls_other.go: %s%v, the import is %s%v", fn, got, fn, sig)
		}
	}
}

// goFuncs reads the parameter types of a file's functions: by import name
// when imports is set (and then also by function name), else by function
// name.
func goFuncs(t *testing.T, path string, imports bool) (map[string][]string, map[string][]string) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	calls, funcs := map[string][]string{}, map[string][]string{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		sig := []string{}
		for _, p := range fd.Type.Params.List {
			for range max(len(p.Names), 1) {
				sig = append(sig, types.ExprString(p.Type))
			}
		}
		if !imports {
			funcs[fd.Name.Name] = sig
			continue
		}
		if fd.Doc == nil {
			continue
		}
		for _, c := range fd.Doc.List {
			if name, ok := strings.CutPrefix(c.Text, "//go:wasmimport mandate "); ok {
				calls[strings.TrimSpace(name)] = sig
				funcs[fd.Name.Name] = sig
				if r := types.ExprString(fd.Type.Results.List[0].Type); r != "abi.Errno" {
					t.Errorf("%s: %s returns %s, want abi.Errno", path, name, r)
				}
			}
		}
	}
	if imports {
		return calls, funcs
	}
	return funcs, nil
}

// TestABIDocTwins checks guest-sdk/ABI.md's "## Host functions" against
// the declarations: one "### `name(p1, p2, ...) -> errno`" heading for
// each, in order, with the declared parameter names; and under each, its
// errno list, one "- `EXXX`: when" item for each declared errno, in
// order, with the declared text.
func TestABIDocTwins(t *testing.T) {
	const where = "guest-sdk/ABI.md"
	b, err := os.ReadFile(where)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start, end := strings.Index(doc, "\n## Host functions\n"), strings.Index(doc, "\n## Capability kinds\n")
	if start < 0 || end < start {
		t.Fatalf("%s: no \"## Host functions\" section before \"## Capability kinds\"", where)
	}
	sections := parseHostCallDoc(t, where, doc[start:end])
	var order []string
	got := map[string][]string{}
	for _, s := range sections {
		order = append(order, s.name)
		got[s.name] = s.params
	}
	compareCalls(t, where, got, twin(func(p sandbox.Param) string { return p.Name }))
	if want := hostCallOrder(); !slices.Equal(order, want) {
		t.Errorf("%s: host calls in the order\n%v\nthe declarations'\n%v", where, order, want)
	}
	for _, hc := range kernel.HostCalls() {
		i := slices.IndexFunc(sections, func(s abiSection) bool { return s.name == hc.Name })
		if i < 0 {
			continue
		}
		var want []string
		for _, e := range hc.Errnos {
			want = append(want, fmt.Sprintf("%s: %s", e.Errno, e.When))
		}
		if g := sections[i].errnos; !slices.Equal(g, want) {
			t.Errorf("%s: %s's errnos\n%s\nthe declaration's (kernel/hostcall.go)\n%s",
				where, hc.Name, strings.Join(g, "\n"), strings.Join(want, "\n"))
		}
	}
}

type abiSection struct {
	name   string
	params []string
	errnos []string // "EXXX: when", the item's text on one line
}

var (
	abiHeading = regexp.MustCompile("^### `([a-z_]+)\\(([^)]*)\\) -> errno`$")
	abiErrno   = regexp.MustCompile("^- `(E[A-Z]+)`: (.*)$")
)

// parseHostCallDoc reads the headings of the host calls and the errno
// items under each. An item continues on indented lines.
func parseHostCallDoc(t *testing.T, where, md string) []abiSection {
	t.Helper()
	var out []abiSection
	var item *string
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "### ") {
			m := abiHeading.FindStringSubmatch(line)
			if m == nil {
				t.Errorf("%s: heading %q is not of the form ### `name(params) -> errno`", where, line)
				item = nil
				continue
			}
			s := abiSection{name: m[1], params: []string{}}
			for _, p := range strings.Split(m[2], ",") {
				if p = strings.TrimSpace(p); p != "" {
					s.params = append(s.params, p)
				}
			}
			out = append(out, s)
			item = nil
			continue
		}
		if len(out) == 0 {
			continue
		}
		s := &out[len(out)-1]
		switch m := abiErrno.FindStringSubmatch(line); {
		case m != nil:
			s.errnos = append(s.errnos, m[1]+": "+m[2])
			item = &s.errnos[len(s.errnos)-1]
		case strings.HasPrefix(line, "- `E"):
			t.Errorf("%s: %s: errno item %q is not of the form - `EXXX`: when", where, s.name, line)
			item = nil
		case item != nil && strings.HasPrefix(line, "  ") && strings.TrimSpace(line) != "":
			*item += " " + strings.TrimSpace(line)
		default:
			item = nil
		}
	}
	return out
}

// compareCalls compares a twin's host calls, each with its parameters as
// the twin writes them, with the declarations'.
func compareCalls(t *testing.T, where string, got, want map[string][]string) {
	t.Helper()
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s: host call %s is missing", where, name)
		case !slices.Equal(g, w):
			t.Errorf("%s: %s(%s), the declaration (kernel/hostcall.go) says %s(%s)",
				where, name, strings.Join(g, ", "), name, strings.Join(w, ", "))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: %s is not a declared host call", where, name)
		}
	}
}
