package spawn

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/kernel/kindapi"
)

var (
	dA = "sha256:" + strings.Repeat("a", 64)
	dB = "sha256:" + strings.Repeat("b", 64)
	dC = "sha256:" + strings.Repeat("c", 64)
)

func grant(t *testing.T, spec string) *Scope {
	t.Helper()
	s, err := New().Grant(kindapi.GrantContext{}, []byte(spec))
	if err != nil {
		t.Fatalf("Grant(%s): %v", spec, err)
	}
	return s.(*Scope)
}

func TestGrant(t *testing.T) {
	s := grant(t, fmt.Sprintf(`{"modules":[%q,%q],"max_children":3,"max_memory":"32MiB","max_timeout":"20s"}`, dB, strings.ToUpper(dA)))
	if !s.AllowsModule(dA) || s.MaxMemory() != 32<<20 || s.MaxTimeout().String() != "20s" {
		t.Fatalf("scope %+v", s)
	}
	s = grant(t, fmt.Sprintf(`{"modules":[%q]}`, dA))
	if s.MaxDepth() != 1 || s.MaxChildren() != 8 || s.MaxMemory() != 0 || s.MaxTimeout() != 0 {
		t.Fatalf("defaults: %+v", s)
	}
	for _, bad := range []string{
		`{}`, `{"modules":[]}`, `{"modules":["sha256:xyz"]}`, `{"modules":["` + dA + `"],"max_depth":0}`,
		`{"modules":["` + dA + `"],"max_depth":99}`, `{"modules":["` + dA + `"],"max_children":0}`,
		`{"modules":["` + dA + `"],"max_timeout":"soon"}`, `{"modules":["` + dA + `"],"extra":1}`,
	} {
		_, err := New().Grant(kindapi.GrantContext{}, []byte(bad))
		var fe *kindapi.FieldError
		if !errors.As(err, &fe) {
			t.Errorf("Grant(%s) = %v, want a FieldError", bad, err)
		}
	}
}

func TestNarrow(t *testing.T) {
	k := New()
	p := grant(t, fmt.Sprintf(`{"modules":[%q,%q],"max_depth":2,"max_children":4,"max_memory":"64MiB"}`, dA, dB))
	for _, tc := range []struct {
		req  string
		want error
	}{
		{`{}`, nil},
		{fmt.Sprintf(`{"modules":[%q]}`, dA), nil},
		{`{"max_children":2,"max_depth":1,"max_memory":"32MiB","max_timeout":"5s"}`, nil},
		{fmt.Sprintf(`{"modules":[%q]}`, dC), kindapi.ErrDenied},
		{`{"max_children":5}`, kindapi.ErrDenied},
		{`{"max_depth":3}`, kindapi.ErrDenied},
		{`{"max_memory":"128MiB"}`, kindapi.ErrDenied},
		{`{"max_children":0}`, kindapi.ErrInvalid},
		{`{"bogus":true}`, kindapi.ErrInvalid},
	} {
		_, err := k.Narrow(p, []byte(tc.req))
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("Narrow(%s) = %v, want %v", tc.req, err, tc.want)
		}
	}
}

// Random narrowing chains never exceed any ancestor.
func TestNarrowNeverWidens(t *testing.T) {
	k := New()
	rng := rand.New(rand.NewSource(7))
	mods := []string{dA, dB, dC}
	for i := 0; i < 500; i++ {
		chain := []*Scope{grant(t, fmt.Sprintf(`{"modules":[%q,%q],"max_depth":3,"max_children":10,"max_memory":"64MiB","max_timeout":"1m"}`, dA, dB))}
		for d := 0; d < 5; d++ {
			req := map[string]any{}
			if rng.Intn(2) == 0 {
				req["modules"] = []string{mods[rng.Intn(3)]}
			}
			if rng.Intn(2) == 0 {
				req["max_children"] = rng.Intn(14)
			}
			if rng.Intn(2) == 0 {
				req["max_depth"] = rng.Intn(5)
			}
			if rng.Intn(2) == 0 {
				req["max_memory"] = rng.Intn(100 << 20)
			}
			if rng.Intn(2) == 0 {
				req["max_timeout"] = fmt.Sprintf("%ds", rng.Intn(90))
			}
			b, _ := json.Marshal(req)
			n, err := k.Narrow(chain[len(chain)-1], b)
			if err != nil {
				continue
			}
			c := n.(*Scope)
			for _, a := range chain {
				if !a.Contains(c) {
					t.Fatalf("%s narrowed from %+v escapes ancestor %+v", b, chain[len(chain)-1], a)
				}
				if c.MaxChildren() > a.MaxChildren() || c.MaxDepth() > a.MaxDepth() || c.MaxMemory() > a.MaxMemory() || c.MaxTimeout() > a.MaxTimeout() {
					t.Fatalf("%+v exceeds %+v", c, a)
				}
				for _, m := range c.Modules() {
					if !a.AllowsModule(m) {
						t.Fatalf("module %s not allowed by ancestor", m)
					}
				}
			}
			chain = append(chain, c)
		}
	}
}

// TestPlacement: placement is granted as "local", "fleet" or "node:NAME",
// travels to the kernel in the child's bounds, and is never changed by
// narrowing.
func TestPlacement(t *testing.T) {
	k := New()
	for in, want := range map[string]string{`"local"`: "", `"fleet"`: "fleet", `"node:eu-1"`: "node:eu-1"} {
		s := grant(t, fmt.Sprintf(`{"modules":[%q],"placement":%s}`, dA, in))
		if s.Placement() != want {
			t.Errorf("placement %s = %q, want %q", in, s.Placement(), want)
		}
		op, err := k.Prepare(&kindapi.Call{Scope: s, Op: kindapi.OpSpawn, Args: []byte(fmt.Sprintf(`{"module":%q}`, dA))})
		if err != nil || op.Spawn == nil || op.Spawn.Placement != want {
			t.Errorf("prepare with placement %s: %+v, %v", in, op.Spawn, err)
		}
	}
	for _, bad := range []string{`"anywhere"`, `"node:"`, `"node:a.b"`, `"node:a b"`, `""`, `7`} {
		_, err := k.Grant(kindapi.GrantContext{}, []byte(fmt.Sprintf(`{"modules":[%q],"placement":%s}`, dA, bad)))
		var fe *kindapi.FieldError
		if !errors.As(err, &fe) || fe.Field != "placement" && bad != `7` {
			t.Errorf("placement %s: %v, want a placement FieldError", bad, err)
		}
	}
	p := grant(t, fmt.Sprintf(`{"modules":[%q],"placement":"fleet"}`, dA))
	for req, want := range map[string]error{
		`{"placement":"fleet"}`: nil, `{}`: nil,
		`{"placement":"local"}`: kindapi.ErrDenied, `{"placement":"node:x"}`: kindapi.ErrDenied,
		`{"placement":"moon"}`: kindapi.ErrInvalid,
	} {
		c, err := k.Narrow(p, []byte(req))
		if (want == nil) != (err == nil) || want != nil && !errors.Is(err, want) {
			t.Errorf("Narrow(%s) = %v, want %v", req, err, want)
			continue
		}
		if err == nil && c.(*Scope).Placement() != "fleet" {
			t.Errorf("Narrow(%s) placed the child %q", req, c.(*Scope).Placement())
		}
	}
	local := grant(t, fmt.Sprintf(`{"modules":[%q]}`, dA))
	if local.Contains(p) || p.Contains(local) {
		t.Error("scopes with different placements contain each other")
	}
}
