package spawn

import (
	"strings"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// FuzzGrant: a grant spec never panics the kind; a failure is a
// *kindapi.FieldError; a granted scope is within the documented bounds
// and contains itself.
func FuzzGrant(f *testing.F) {
	for _, s := range []string{
		`{"modules":["` + dA + `","` + strings.ToUpper(dB) + `"],"max_children":3,"max_memory":"32MiB","max_timeout":"20s"}`,
		`{"modules":["` + dA + `"]}`, `{"modules":["` + dA + `"],"max_depth":99}`, `{"modules":["sha256:xyz"]}`,
		`{"modules":["` + dA + `"],"max_memory":-1}`, `{"modules":["` + dA + `"],"max_timeout":"-1s"}`, `{}`, `[`,
		`{"modules":[" ` + dA + ` "],"max_memory":9223372036854775807,"max_timeout":"2562047h"}`,
	} {
		f.Add([]byte(s))
	}
	k := New()
	f.Fuzz(func(t *testing.T, b []byte) {
		ks, err := k.Grant(kindapi.GrantContext{}, b)
		if err != nil {
			if _, ok := err.(*kindapi.FieldError); !ok {
				t.Fatalf("Grant(%q): %T %v, want a *kindapi.FieldError", b, err, err)
			}
			return
		}
		s := ks.(*Scope)
		if len(s.modules) == 0 || len(s.modules) > MaxModules || s.maxDepth < 1 || s.maxDepth > kernel.MaxSpawnDepth ||
			s.maxChildren < 1 || s.maxChildren > MaxChildrenCap || s.maxTimeout < 0 {
			t.Fatalf("Grant(%q) = %+v: out of bounds", b, s)
		}
		if !s.Contains(s) {
			t.Fatalf("Grant(%q) = %+v, which does not contain itself", b, s)
		}
		if _, err := s.MarshalJSON(); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzNarrow: a narrowing request never panics; a success is contained in
// its parent; a failure is EINVAL or EDENIED.
func FuzzNarrow(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"modules":["` + dA + `"]}`, `{"modules":["` + dC + `"]}`, `{"max_depth":1}`, `{"max_depth":3}`,
		`{"max_children":2}`, `{"max_children":0}`, `{"max_memory":"16MiB"}`, `{"max_memory":"1GiB"}`, `{"max_memory":0}`,
		`{"max_timeout":"10s"}`, `{"max_timeout":"1h"}`, `{"max_timeout":"0s"}`, `[`, `{"x":1}`,
	} {
		f.Add(uint8(0), []byte(s))
	}
	k := New()
	var parents []kindapi.Scope
	for _, spec := range []string{
		`{"modules":["` + dA + `","` + dB + `"],"max_depth":2,"max_children":3,"max_memory":"32MiB","max_timeout":"20s"}`,
		`{"modules":["` + dA + `"]}`,
	} {
		s, err := k.Grant(kindapi.GrantContext{}, []byte(spec))
		if err != nil {
			f.Fatal(err)
		}
		parents = append(parents, s)
	}
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		cs, ok := kerneltest.CheckNarrow(t, k, []kindapi.Scope{parents[int(which)%len(parents)]}, b, abi.EINVAL, abi.EDENIED)
		if !ok {
			return
		}
		if c := cs.(*Scope); c.maxDepth < 1 || c.maxChildren < 1 || len(c.modules) == 0 {
			t.Fatalf("Narrow(%q) = %+v: out of bounds", b, c)
		}
	})
}
