package manifest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/caps/data"
	"github.com/mandatevm/mandate/caps/declassify"
	"github.com/mandatevm/mandate/caps/net"
	"github.com/mandatevm/mandate/caps/pay"
	"github.com/mandatevm/mandate/caps/spawn"
	"github.com/mandatevm/mandate/constraint"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// kindsGranter grants with the real kinds and compiles with the real
// constraint compiler, without a kernel (which needs an engine).
type kindsGranter struct {
	kinds map[string]kindapi.Kind
	cc    *constraint.Compiler
}

func newKindsGranter() *kindsGranter {
	noDNS := func(context.Context, string) ([]netip.Addr, error) { return nil, errors.New("no lookups in tests") }
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	g := &kindsGranter{kinds: map[string]kindapi.Kind{}, cc: constraint.New()}
	for _, k := range []kindapi.Kind{
		net.New(net.WithLookup(noDNS)), data.New(nil), pay.New(pay.WithClock(func() time.Time { return now })),
		spawn.New(), declassify.New(),
	} {
		g.kinds[k.Name()] = k
	}
	return g
}

func (g *kindsGranter) Kind(n string) (kindapi.Kind, bool) { k, ok := g.kinds[n]; return k, ok }
func (g *kindsGranter) Kinds() []string                    { return []string{"data", "declassify", "net", "pay", "spawn"} }
func (g *kindsGranter) Grant(kind string, gc kindapi.GrantContext, spec []byte) (kindapi.Scope, error) {
	return g.kinds[kind].Grant(gc, spec)
}
func (g *kindsGranter) ParseBudget(kind string, s kindapi.Scope, text string) (int64, error) {
	return kindapi.ParseBudget(g.kinds[kind], s, text)
}
func (g *kindsGranter) CompileConstraints(kind string, when, approveWhen []string) (kernel.Constraints, error) {
	var cs kernel.Constraints
	vars := kernel.ConstraintVars(g.kinds[kind])
	for _, src := range when {
		c, err := g.cc.Compile(src, vars)
		if err != nil {
			return kernel.Constraints{}, err
		}
		cs.When = append(cs.When, c)
	}
	for _, src := range approveWhen {
		c, err := g.cc.Compile(src, vars)
		if err != nil {
			return kernel.Constraints{}, err
		}
		cs.ApproveWhen = append(cs.ApproveWhen, c)
	}
	return cs, nil
}

// FuzzParse: a manifest is a user's file. Parsing never panics; a failure
// is an *Error with a message; parsing is deterministic; a manifest that
// parses is valid (a task name, a principal, a module, limits within
// bounds, distinct cap names, each spec a JSON object without the
// kernel's attributes) and granting it with the real kinds never panics
// and fails only with a positioned *Error.
func FuzzParse(f *testing.F) {
	f.Add(full, "http://127.0.0.1:1234")
	examples, _ := filepath.Glob("../examples/*/*.hcl")
	for _, p := range examples {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(string(b), "http://127.0.0.1:8080")
		}
	}
	for _, s := range []string{
		``, `task "" {}`, `task "a" { module = "guest.wasm" principal = "p" }`,
		"task \"a\" {\n module = \"guest.wasm\"\n principal = \"p\"\n}\ntask \"b\" {}\n",
		"task \"a\" {\n module = \"guestdir\"\n principal = var.origin\n limits {\n memory = 0\n handles = 1.5\n output = \"5XB\"\n timeout = \"-1s\"\n }\n}\n",
		"task \"a\" {\n module = \"guest.wasm\"\n principal = \"p\"\n cap \"net\" \"x\" {\n when = [\"request.method == 'GET'\", 1]\n label = 1\n audit = \"yes\"\n }\n cap \"net\" \"x\" {}\n}\n",
		"task \"a\" {\n module = \"guest.wasm\"\n principal = \"p\"\n clearance = [\"pii:alice\"]\n seed \"c\" {\n file = \"seed.json\"\n relations = { manager = \"manager_of\" }\n }\n}\n",
		"task \"a\" {\n module = \"guest.wasm\"\n principal = \"p\"\n cap \"data\" \"d\" {\n collection = \"c\"\n records = { owners = [\"a\"] }\n fields = [\"*\"]\n x = { for k, v in { a = 1 } : k => v * 2 }\n y = [for s in [\"a\", \"b\"] : upper(s)]\n z = \"${var.origin}/x\"\n }\n}\n",
		"task \"a\" {\n module = \"guest.wasm\"\n principal = \"p\"\n cap \"pay\" \"p\" {\n provider = var.origin\n allow_private = true\n instrument = { env = \"T\" }\n payees = [\"a.example\"]\n currency = \"USD\"\n max_amount = 1.5\n approve_when = \"charge.amount > 10\"\n }\n}\n",
		"task \"a\" {\n module = \"guest.wasm\"\n principal = \"p\"\n cap \"declassify\" \"d\" {\n drop = [\"pii:alice\"]\n project = [\"a.b\"]\n }\n cap \"spawn\" \"s\" {\n modules = [\"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"]\n max_memory = \"1MiB\"\n }\n}\n",
		"task \"a\" {\n module = var[\"origin\"]\n principal = var.nope\n entry = null\n digest = \"sha256:00\"\n}\n",
		"task \"a\" {\n module = \"guest.wasm\"\n principal = \"p\"\n limits {}\n limits {}\n cap \"x\" \"\" {}\n}\n",
	} {
		f.Add(s, "http://127.0.0.1:1234")
	}
	dir := f.TempDir()
	for _, d := range []string{"guestdir", "guest", "planner", "finder", "tool", "data"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			f.Fatal(err)
		}
	}
	for _, p := range []string{"guest.wasm", "seed.json", "data/people.json", "data/benefits.json", "data/itinerary.json"} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte("\x00asm\x01\x00\x00\x00"), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	g := newKindsGranter()
	gc := kindapi.GrantContext{Dir: dir, LookupEnv: func(string) (string, bool) { return "a-token", true }}
	f.Fuzz(func(t *testing.T, src, v string) {
		if len(src) > MaxSize {
			return
		}
		vars := map[string]string{"origin": v}
		m, err := Parse([]byte(src), "fuzz.hcl", dir, vars)
		m2, err2 := Parse([]byte(src), "fuzz.hcl", dir, vars)
		if (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) || !reflect.DeepEqual(m, m2) {
			t.Fatalf("Parse(%q) is not deterministic: %v then %v", src, err, err2)
		}
		if err != nil {
			var me *Error
			if !errors.As(err, &me) || err.Error() == "" || err.Error() == "manifest: unknown error" {
				t.Fatalf("Parse(%q): error %T %q", src, err, err)
			}
			return
		}
		if m.Name == "" || strings.TrimSpace(m.Principal) == "" || m.ModulePath == "" {
			t.Fatalf("Parse(%q) = %+v: missing name, principal or module", src, m)
		}
		if l := m.Limits(); l.Memory > MaxMemory || l.MaxOutput > MaxOutput || l.Timeout < 0 || l.MaxHandles < 0 || l.MaxHandles > kernel.MaxHandles ||
			l.Functions < 0 || l.Functions > MaxFunctions || l.Locals < 0 || l.Locals > MaxLocals ||
			l.Nesting < 0 || l.Nesting > MaxNesting || l.BrTableTargets < 0 || l.BrTableTargets > MaxBrTableTargets ||
			l.FunctionSize < 0 || l.FunctionSize > MaxFunctionSize || l.CompileMemory > MaxCompileMemory {
			t.Fatalf("Parse(%q): limits %+v out of bounds", src, l)
		}
		seen := map[string]bool{}
		for _, c := range m.Caps {
			if c.Kind == "" || c.Name == "" || len(c.Name) > abi.MaxNameLen || seen[c.Name] {
				t.Fatalf("Parse(%q): cap %q %q", src, c.Kind, c.Name)
			}
			seen[c.Name] = true
			var spec map[string]json.RawMessage
			if err := json.Unmarshal(c.Spec, &spec); err != nil || spec == nil {
				t.Fatalf("Parse(%q): cap %q spec %s is not an object: %v", src, c.Name, c.Spec, err)
			}
			for _, k := range []string{"audit", "when", "approve_when", "label", "rate", "max_uses", "budget"} {
				if _, ok := spec[k]; ok {
					t.Fatalf("Parse(%q): cap %q spec %s has the kernel's %s", src, c.Name, c.Spec, k)
				}
			}
		}
		grants, err := m.GrantsWith(g, gc)
		if err != nil {
			var me *Error
			if !errors.As(err, &me) || err.Error() == "" {
				t.Fatalf("Parse(%q): GrantsWith error %T %q", src, err, err)
			}
			return
		}
		if len(grants) != len(m.Caps) {
			t.Fatalf("Parse(%q): %d grants for %d caps", src, len(grants), len(m.Caps))
		}
		for _, gr := range grants {
			if gr.Scope == nil || !gr.Scope.Contains(gr.Scope) {
				t.Fatalf("Parse(%q): grant %q scope %v", src, gr.Name, gr.Scope)
			}
		}
	})
}

// TestKernelAllowance: max_uses on any kind and budget on a kind with
// amounts are the kernel's attributes, read into GrantSpec.Allowance (the
// budget in the kind's unit); anything else is an error at the attribute.
func TestKernelAllowance(t *testing.T) {
	g := newKindsGranter()
	gc := kindapi.GrantContext{LookupEnv: func(string) (string, bool) { return "tok", true }}
	head := "task \"a\" {\nmodule = \"guest.wasm\"\nprincipal = \"p\"\n"
	netCap := "cap \"net\" \"web\" {\n  origin = \"https://a.example\"\n  max_uses = %s\n}\n"
	payCap := "cap \"pay\" \"card\" {\n  provider = \"https://pay.example\"\n  instrument = { env = \"CARD\" }\n  payees = [\"a.example\"]\n  currency = \"USD\"\n  budget = %s\n}\n"
	for _, tc := range []struct {
		name, cap string
		want      kernel.Allowance
		err       string
	}{
		{"one message", fmt.Sprintf(netCap, "1"), kernel.Allowance{MaxUses: 1}, ""},
		{"zero uses", fmt.Sprintf(netCap, "0"), kernel.Allowance{}, ":6,14: max_uses must be a whole number of at least 1"},
		{"fractional uses", fmt.Sprintf(netCap, "1.5"), kernel.Allowance{}, "max_uses must be a whole number"},
		{"pay budget", fmt.Sprintf(payCap, `"100.00"`), kernel.Allowance{Budget: 10000}, ""},
		{"pay budget with currency", fmt.Sprintf(payCap, `"100 USD"`), kernel.Allowance{Budget: 10000}, ""},
		{"pay budget as a number", fmt.Sprintf(payCap, `12.5`), kernel.Allowance{Budget: 1250}, ""},
		{"pay budget in another currency", fmt.Sprintf(payCap, `"100 EUR"`), kernel.Allowance{}, `:9,12: cap "pay" "card": budget: amount "100 EUR" is in EUR, not USD`},
		{"net has no budget", "cap \"net\" \"web\" {\n  origin = \"https://a.example\"\n  budget = \"10\"\n}\n", kernel.Allowance{}, "a net capability has no amounts to budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Load(write(t, head+tc.cap+"}\n"), nil)
			if err == nil {
				var grants []kernel.GrantSpec
				grants, err = m.GrantsWith(g, gc)
				if err == nil {
					if grants[0].Allowance != tc.want {
						t.Fatalf("allowance %+v, want %+v", grants[0].Allowance, tc.want)
					}
					if tc.err != "" {
						t.Fatalf("no error, want %q", tc.err)
					}
					return
				}
			}
			if tc.err == "" || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
		})
	}
}
