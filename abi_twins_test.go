package mandate_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// TestHostCallTwins checks the one host-call table (abi.HostCalls, from
// which the kernel registers its host functions) against its twins: the
// guest SDK's //go:wasmimport declarations (name and parameter count) and
// the headings of guest-sdk/ABI.md (name and parameter count).
func TestHostCallTwins(t *testing.T) {
	want := map[string]int{}
	for _, hc := range abi.HostCalls() {
		want[hc.Name] = hc.Params
	}

	// The SDK's imports.
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "guest-sdk/hostcalls_wasip1.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	sdk := map[string]int{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Doc == nil {
			continue
		}
		for _, c := range fd.Doc.List {
			if name, ok := strings.CutPrefix(c.Text, "//go:wasmimport mandate "); ok {
				n := 0
				for _, p := range fd.Type.Params.List {
					n += max(len(p.Names), 1)
				}
				sdk[strings.TrimSpace(name)] = n
			}
		}
	}
	compareCalls(t, "guest-sdk/hostcalls_wasip1.go", sdk, want)

	// ABI.md: "### `name(p1, p2, ...) -> errno`".
	doc, err := os.ReadFile("guest-sdk/ABI.md")
	if err != nil {
		t.Fatal(err)
	}
	md := map[string]int{}
	for _, m := range regexp.MustCompile("(?m)^### `([a-z_]+)\\(([^)]*)\\) -> errno`").FindAllStringSubmatch(string(doc), -1) {
		n := 0
		if strings.TrimSpace(m[2]) != "" {
			n = len(strings.Split(m[2], ","))
		}
		md[m[1]] = n
	}
	compareCalls(t, "guest-sdk/ABI.md", md, want)
}

func compareCalls(t *testing.T, where string, got, want map[string]int) {
	t.Helper()
	for name, n := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s: host call %s is missing", where, name)
		case g != n:
			t.Errorf("%s: %s has %d parameters, the table %d", where, name, g, n)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: %s is not in abi.HostCalls", where, name)
		}
	}
}
