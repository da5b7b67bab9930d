package host

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/mandatevm/mandate/sandbox"
)

// fakeEngine compiles anything into a fakeModule, counting, and blocks
// a compilation while gate is set.
type fakeEngine struct {
	mu       sync.Mutex
	compiles int           // protected by mu
	gate     chan struct{} // protected by mu
}

func (e *fakeEngine) Name() string                          { return "fake" }
func (e *fakeEngine) Host(string, []sandbox.HostFunc) error { return nil }
func (e *fakeEngine) Close(context.Context) error           { return nil }
func (e *fakeEngine) Compile(ctx context.Context, wasm []byte) (sandbox.Module, error) {
	e.mu.Lock()
	e.compiles++
	gate := e.gate
	e.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if string(wasm) == "bad" {
		return nil, errors.New("invalid module")
	}
	return &fakeModule{digest: sandbox.Digest(wasm)}, nil
}

type fakeModule struct {
	digest string
	mu     sync.Mutex
	closed int // protected by mu
}

func (m *fakeModule) Digest() string                               { return m.digest }
func (m *fakeModule) Kind() sandbox.ModuleKind                     { return sandbox.Command }
func (m *fakeModule) Run(context.Context, sandbox.RunConfig) error { return nil }
func (m *fakeModule) Close(context.Context) error {
	m.mu.Lock()
	m.closed++
	m.mu.Unlock()
	return nil
}

func (m *fakeModule) closes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

func acquireFor(t *testing.T, c *moduleCache, wasm string) *cachedModule {
	t.Helper()
	e, err := c.acquire(context.Background(), []byte(wasm), sandbox.Digest([]byte(wasm)))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestModuleCacheBound: idle modules past the bound are closed, least
// recently used first; a module in use never is, and one used again is
// not compiled again.
func TestModuleCacheBound(t *testing.T) {
	eng := &fakeEngine{}
	c := newModuleCache(eng, 2)
	held := acquireFor(t, c, "held")
	var mods []*fakeModule
	for i := range 5 {
		e := acquireFor(t, c, fmt.Sprint(i))
		mods = append(mods, e.mod.(*fakeModule))
		c.release(e)
	}
	// Idle: 3, 4; in use: held.
	if got := c.len(); got != 3 {
		t.Errorf("cached %d modules, want 3 (2 idle, 1 in use)", got)
	}
	for i, m := range mods {
		if want := map[bool]int{true: 1, false: 0}[i < 3]; m.closes() != want {
			t.Errorf("module %d closed %d times, want %d", i, m.closes(), want)
		}
	}
	// 3 used again: no compile, and 4 becomes the least recently used.
	n := eng.compiles
	c.release(acquireFor(t, c, "3"))
	if eng.compiles != n {
		t.Errorf("a cached module was compiled again")
	}
	c.release(held)
	if mods[4].closes() != 1 || mods[3].closes() != 0 || held.mod.(*fakeModule).closes() != 0 {
		t.Errorf("after the held module went idle: closes 3:%d 4:%d held:%d, want 0 1 0",
			mods[3].closes(), mods[4].closes(), held.mod.(*fakeModule).closes())
	}
	c.close()
	if mods[3].closes() != 1 || held.mod.(*fakeModule).closes() != 1 {
		t.Error("close left modules open")
	}
}

// TestModuleCacheCompilesOnce: runs asking at once for a module compile
// it once; a failure is every waiter's and is not kept; a compilation
// stopped by its run's ctx is done again for the run waiting.
func TestModuleCacheCompilesOnce(t *testing.T) {
	eng := &fakeEngine{gate: make(chan struct{})}
	c := newModuleCache(eng, 4)
	wasm := []byte("m")
	var wg sync.WaitGroup
	got := make([]*cachedModule, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := c.acquire(context.Background(), wasm, sandbox.Digest(wasm))
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = e
		}()
	}
	close(eng.gate)
	wg.Wait()
	if eng.compiles != 1 {
		t.Errorf("8 runs at once compiled %d times, want 1", eng.compiles)
	}
	for _, e := range got {
		if e != got[0] {
			t.Fatal("runs got different modules")
		}
		c.release(e)
	}

	for range 2 {
		if _, err := c.acquire(context.Background(), []byte("bad"), sandbox.Digest([]byte("bad"))); err == nil || err.Error() != "invalid module" {
			t.Fatalf("bad module: %v, want the engine's error", err)
		}
	}
	if eng.compiles != 3 {
		t.Errorf("compiles %d, want 3: a failure is not kept", eng.compiles)
	}

	// The first run's compilation is stopped by its ctx; the second run,
	// waiting for it, compiles the module itself.
	eng.mu.Lock()
	eng.gate = make(chan struct{})
	eng.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := c.acquire(ctx, []byte("slow"), sandbox.Digest([]byte("slow")))
		first <- err
	}()
	for n := 0; n != 4; runtime.Gosched() {
		eng.mu.Lock()
		n = eng.compiles
		eng.mu.Unlock()
	}
	second := make(chan error, 1)
	go func() {
		_, err := c.acquire(context.Background(), []byte("slow"), sandbox.Digest([]byte("slow")))
		second <- err
	}()
	// Both in: the first compiling, the second waiting.
	for users := 0; users != 2; runtime.Gosched() {
		c.mu.Lock()
		if e := c.entries[sandbox.Digest([]byte("slow"))]; e != nil {
			users = e.users
		}
		c.mu.Unlock()
	}
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("first: %v, want canceled", err)
	}
	eng.mu.Lock()
	close(eng.gate)
	eng.mu.Unlock()
	if err := <-second; err != nil {
		t.Fatalf("second: %v", err)
	}
	if eng.compiles != 5 {
		t.Errorf("compiles %d, want 5: the second run compiled what the first could not", eng.compiles)
	}
}
