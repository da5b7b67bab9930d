package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"

	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox"
)

// nopEngine lets the kernel be built without running guests.
type nopEngine struct{}

func (nopEngine) Name() string                          { return "nop" }
func (nopEngine) Host(string, []sandbox.HostFunc) error { return nil }
func (nopEngine) Compile(context.Context, []byte) (sandbox.Module, error) {
	return nil, errors.New("nop")
}
func (nopEngine) CompileWith(context.Context, []byte, sandbox.CompileConfig) (sandbox.Module, error) {
	return nil, errors.New("nop")
}
func (nopEngine) Close(context.Context) error { return nil }

func newTestKernel(t testing.TB) *kernel.Kernel {
	t.Helper()
	k, err := kernel.New(kernel.Config{Engine: nopEngine{}, Kinds: []kindapi.Kind{kerneltest.New()}})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func rootCap(t testing.TB, k *kernel.Kernel, level int) *kernel.Cap {
	t.Helper()
	scope, err := k.Grant("test", kindapi.GrantContext{}, []byte(fmt.Sprintf(`{"level":%d}`, level)))
	if err != nil {
		t.Fatal(err)
	}
	return mustRoot(t, k, scope)
}

// mustRoot mints a root node with no holder.
func mustRoot(t testing.TB, k *kernel.Kernel, s kindapi.Scope) *kernel.Cap {
	t.Helper()
	c, err := kernel.NewRootCapForTest(k, "test", s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDeriveOnlyNarrower(t *testing.T) {
	k := newTestKernel(t)
	root := rootCap(t, k, 5)
	for _, tc := range []struct {
		req   string
		errIs error
	}{
		{`{"level":3}`, nil},
		{`{"level":5}`, nil},
		{`{"ops":["noop"]}`, nil},
		{`{"level":6}`, kindapi.ErrDenied},
		{`{"ops":["noop","nuke"]}`, kindapi.ErrDenied},
		{`{"level":"x"}`, kindapi.ErrInvalid},
		{`not json`, kindapi.ErrInvalid},
		{`{"unknown":1}`, kindapi.ErrInvalid},
	} {
		_, err := k.Derive(root, nil, []byte(tc.req))
		if tc.errIs == nil && err != nil {
			t.Errorf("Derive(%s) = %v, want success", tc.req, err)
		}
		if tc.errIs != nil && !errors.Is(err, tc.errIs) {
			t.Errorf("Derive(%s) = %v, want %v", tc.req, err, tc.errIs)
		}
	}
}

// TestDeriveRandomNeverWidens: random chains of narrowing requests never
// produce a scope outside any ancestor.
func TestDeriveRandomNeverWidens(t *testing.T) {
	k := newTestKernel(t)
	rng := rand.New(rand.NewSource(1))
	ops := []string{"noop", "echo", "level", "panic", "nuke"}
	for i := 0; i < 300; i++ {
		chain := []*kernel.Cap{rootCap(t, k, 10)}
		for d := 0; d < 6; d++ {
			var sub []string
			for _, op := range ops {
				if rng.Intn(2) == 0 {
					sub = append(sub, op)
				}
			}
			raw, _ := json.Marshal(map[string]any{"level": rng.Intn(14) - 2, "ops": sub})
			req := string(raw)
			c, err := k.Derive(chain[len(chain)-1], nil, []byte(req))
			if err != nil {
				if !errors.Is(err, kindapi.ErrDenied) {
					t.Fatalf("Derive(%s): unexpected error %v", req, err)
				}
				continue
			}
			for _, anc := range chain {
				if !anc.Scope().Contains(c.Scope()) {
					t.Fatalf("derived %s outside ancestor %s", js(c.Scope()), js(anc.Scope()))
				}
			}
			chain = append(chain, c)
		}
	}
}

func js(s kindapi.Scope) string { b, _ := s.MarshalJSON(); return string(b) }

func TestRevokeTransitive(t *testing.T) {
	k := newTestKernel(t)
	root := rootCap(t, k, 5)
	a, _ := k.Derive(root, nil, []byte(`{"level":4}`))
	b, _ := k.Derive(a, nil, []byte(`{"level":3}`))
	sib, _ := k.Derive(root, nil, []byte(`{"level":2}`))
	if n := k.Revoke(a); n != 2 {
		t.Fatalf("Revoke(a) revoked %d, want 2", n)
	}
	if !a.Revoked() || !b.Revoked() || root.Revoked() || sib.Revoked() {
		t.Fatalf("revoked: a=%v b=%v root=%v sib=%v; want a, b only", a.Revoked(), b.Revoked(), root.Revoked(), sib.Revoked())
	}
	if _, err := k.Derive(b, nil, []byte(`{}`)); !errors.Is(err, kindapi.ErrRevoked) {
		t.Fatalf("derive from revoked: %v", err)
	}
}

// TestRevokeRacesDerive: a derivation racing a revocation of its parent
// either fails or is itself revoked; nothing escapes.
func TestRevokeRacesDerive(t *testing.T) {
	k := newTestKernel(t)
	for i := 0; i < 200; i++ {
		root := rootCap(t, k, 5)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var got []*kernel.Cap
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if c, err := k.Derive(root, nil, []byte(`{}`)); err == nil {
					mu.Lock()
					got = append(got, c)
					mu.Unlock()
				}
			}()
		}
		k.Revoke(root)
		wg.Wait()
		for _, c := range got {
			if !c.Revoked() {
				t.Fatalf("child %s of a revoked cap escaped revocation", c.ID())
			}
		}
	}
}
