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

// CompileWith compiles as Compile does; the module "big" defines 10
// functions, past limits of fewer.
func (e *fakeEngine) CompileWith(ctx context.Context, wasm []byte, cfg sandbox.CompileConfig) (sandbox.Module, error) {
	m, err := e.Compile(ctx, wasm)
	if err == nil && string(wasm) == "big" && cfg.Limits.WithDefaults().Functions < 10 {
		m.Close(ctx)
		return nil, fmt.Errorf("fake: %w: the module defines 10 functions; the limit (limits { functions }) is %d",
			sandbox.ErrStaticLimit, cfg.Limits.Functions)
	}
	return m, err
}

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
	e, err := c.acquire(context.Background(), []byte(wasm), sandbox.Digest([]byte(wasm)), sandbox.CompileConfig{})
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
			e, err := c.acquire(context.Background(), wasm, sandbox.Digest(wasm), sandbox.CompileConfig{})
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
		if _, err := c.acquire(context.Background(), []byte("bad"), sandbox.Digest([]byte("bad")), sandbox.CompileConfig{}); err == nil || err.Error() != "invalid module" {
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
		_, err := c.acquire(ctx, []byte("slow"), sandbox.Digest([]byte("slow")), sandbox.CompileConfig{})
		first <- err
	}()
	for n := 0; n != 4; runtime.Gosched() {
		eng.mu.Lock()
		n = eng.compiles
		eng.mu.Unlock()
	}
	second := make(chan error, 1)
	go func() {
		_, err := c.acquire(context.Background(), []byte("slow"), sandbox.Digest([]byte("slow")), sandbox.CompileConfig{})
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

// TestModuleCacheChecksEachRunsLimits: a cached module is checked against
// the static limits of each run's task: tighter ones are refused (once
// asked of the engine, then remembered), the module stays cached for the
// others, and a run under limits another run was refused for compiles
// under its own.
func TestModuleCacheChecksEachRunsLimits(t *testing.T) {
	ctx := context.Background()
	eng := &fakeEngine{}
	c := newModuleCache(eng, 2)
	big := []byte("big")
	d := sandbox.Digest(big)
	tight := sandbox.CompileConfig{Limits: sandbox.StaticLimits{Functions: 5}}

	if _, err := c.acquire(ctx, big, d, tight); !errors.Is(err, sandbox.ErrStaticLimit) {
		t.Fatalf("tight, not cached: %v, want ErrStaticLimit", err)
	}
	e, err := c.acquire(ctx, big, d, sandbox.CompileConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := c.acquire(ctx, big, d, tight); !errors.Is(err, sandbox.ErrStaticLimit) {
			t.Fatalf("tight, cached (%d): %v, want ErrStaticLimit", i, err)
		}
	}
	e2, err := c.acquire(ctx, big, d, sandbox.CompileConfig{Limits: sandbox.DefaultStaticLimits})
	if err != nil || e2 != e {
		t.Fatalf("defaults, cached: %v, %v; want the cached module", e2, err)
	}
	if eng.compiles != 3 {
		t.Errorf("compiles %d, want 3: one refusal, one compile, one check of the tight limits", eng.compiles)
	}
	if e.users != 2 {
		t.Errorf("users %d, want 2: a refused run holds nothing", e.users)
	}
	c.release(e)
	c.release(e2)
	if e.mod.(*fakeModule).closes() != 0 {
		t.Error("a refusal closed the cached module")
	}

	// A run waiting for a compile that the compiling run's limits refuse
	// compiles under its own.
	other := []byte("big")
	c = newModuleCache(eng, 2)
	eng.mu.Lock()
	eng.gate = make(chan struct{})
	n := eng.compiles
	eng.mu.Unlock()
	first := make(chan error, 1)
	go func() {
		_, err := c.acquire(ctx, other, d, tight)
		first <- err
	}()
	for m := n; m != n+1; runtime.Gosched() {
		eng.mu.Lock()
		m = eng.compiles
		eng.mu.Unlock()
	}
	second := make(chan error, 1)
	go func() {
		_, err := c.acquire(ctx, other, d, sandbox.CompileConfig{})
		second <- err
	}()
	for users := 0; users != 2; runtime.Gosched() {
		c.mu.Lock()
		if e := c.entries[d]; e != nil {
			users = e.users
		}
		c.mu.Unlock()
	}
	eng.mu.Lock()
	close(eng.gate)
	eng.mu.Unlock()
	if err := <-first; !errors.Is(err, sandbox.ErrStaticLimit) {
		t.Fatalf("first: %v, want ErrStaticLimit", err)
	}
	if err := <-second; err != nil {
		t.Fatalf("second: %v, want the module compiled under its own limits", err)
	}
}
