package kernel_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/caps/data"
	"github.com/mandatevm/mandate/caps/declassify"
	"github.com/mandatevm/mandate/caps/net"
	"github.com/mandatevm/mandate/caps/pay"
	"github.com/mandatevm/mandate/caps/spawn"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// foreignScope is a Scope no kind made; ownScope stands for a kind's own.
type foreignScope struct{}

func (foreignScope) MarshalJSON() ([]byte, error) { return json.Marshal("foreign") }
func (foreignScope) Contains(kindapi.Scope) bool  { return false }

type ownScope struct{ n int }

func (*ownScope) MarshalJSON() ([]byte, error) { return json.Marshal("own") }
func (*ownScope) Contains(kindapi.Scope) bool  { return false }

func scopeAsOwn(s kindapi.Scope) (*ownScope, error) { return kindapi.ScopeAs[*ownScope](s, "test") }

func TestScopeAs(t *testing.T) {
	p := &ownScope{n: 1}
	if got, err := scopeAsOwn(p); err != nil || got != p {
		t.Fatalf("ScopeAs(own scope) = %v, %v", got, err)
	}
	for name, s := range map[string]kindapi.Scope{
		"nil":       nil,
		"typed nil": (*ownScope)(nil),
		"foreign":   foreignScope{},
	} {
		got, err := scopeAsOwn(s)
		if got != nil || kindapi.ErrnoOf(err) != abi.EINTERNAL || !strings.Contains(err.Error(), "test: scope is") {
			t.Errorf("ScopeAs(%s) = %v, %v; want nil and EINTERNAL naming the kind", name, got, err)
		}
	}

	// AsScope never turns a nil *T beside an error into a non-nil Scope.
	if s, err := kindapi.AsScope((*ownScope)(nil), kindapi.ErrDenied); s != nil || err != kindapi.ErrDenied {
		t.Errorf("AsScope(nil, err) = %v, %v", s, err)
	}
	if s, err := kindapi.AsScope(p, nil); s != kindapi.Scope(p) || err != nil {
		t.Errorf("AsScope(p, nil) = %v, %v", s, err)
	}
}

// TestKindsRefuseForeignScopes: every kind handed a scope it did not make
// (a kernel bug, never a guest's doing) answers EINTERNAL naming itself,
// from Narrow and from Prepare, and does not panic.
func TestKindsRefuseForeignScopes(t *testing.T) {
	for _, k := range []kindapi.Kind{
		data.New(nil), declassify.New(), net.New(), pay.New(), spawn.New(),
	} {
		for name, s := range map[string]kindapi.Scope{"nil": nil, "foreign": foreignScope{}} {
			_, err := k.Narrow(s, []byte(`{}`))
			if kindapi.ErrnoOf(err) != abi.EINTERNAL || !strings.HasPrefix(err.Error(), k.Name()+": scope is") {
				t.Errorf("%s.Narrow(%s scope) = %v; want EINTERNAL naming the kind", k.Name(), name, err)
			}
			ops := k.Info().Ops
			_, err = k.Prepare(&kindapi.Call{Op: ops[0], Scope: s, Args: []byte(`{}`)})
			if kindapi.ErrnoOf(err) != abi.EINTERNAL || !strings.HasPrefix(err.Error(), k.Name()+": scope is") {
				t.Errorf("%s.Prepare(%s scope) = %v; want EINTERNAL naming the kind", k.Name(), name, err)
			}
			if d := k.Describe(s); len(d.Fields) != 0 {
				t.Errorf("%s.Describe(%s scope) = %+v; want nothing", k.Name(), name, d)
			}
		}
	}
}
