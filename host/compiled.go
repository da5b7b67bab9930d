package host

import (
	"container/list"
	"context"
	"errors"
	"path/filepath"
	"sync"

	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/sandbox"
)

// MaxIdleModules bounds the compiled modules a host keeps for runs to
// come while no run uses them: past it, the least recently used idle one
// is closed. A module some run uses is never closed under it, so the
// cache holds at most this many plus those in use. A long-lived host (a
// fleet node, "mandate node") sees a few modules again and again, and a
// compiled Go guest costs about five times its size (on wazero, RSS: 16
// MiB for the benefits desk's 3.4 MB, 47 MiB for the quickstart's 10.7
// MB; about half that on wasmtime): 8 keeps a working set warm, a few
// hundred MiB at most, without growing with every module ever run.
const MaxIdleModules = 8

// engine returns the host's compiled modules, and through them its
// engine: made on the first run and shared by every run after it, the
// kernel's host functions registered once (kernel.RegisterHost). A
// failure is not kept: the next run tries again.
//
// Preconditions: the caller is a run counted in h.runs, so Close does not
// close the engine under it.
func (h *Host) engine(ctx context.Context) (*moduleCache, error) {
	h.engMu.Lock()
	defer h.engMu.Unlock()
	if h.mods != nil {
		return h.mods, nil
	}
	// The engine outlives this run: it keeps ctx's values, not its end.
	eng, err := NewEngine(context.WithoutCancel(ctx), h.opts.Engine, filepath.Join(h.opts.CacheDir, h.opts.Engine))
	if err != nil {
		return nil, err
	}
	if err := kernel.RegisterHost(eng); err != nil {
		eng.Close(ctx)
		return nil, err
	}
	h.mods = newModuleCache(eng, MaxIdleModules)
	h.opts.Logger.Info("engine started", "engine", h.opts.Engine)
	return h.mods, nil
}

// closeEngine closes the cached modules, then the engine.
//
// Preconditions: no run is left (Close waited for them).
func (h *Host) closeEngine() error {
	h.engMu.Lock()
	defer h.engMu.Unlock()
	if h.mods == nil {
		return nil
	}
	h.mods.close()
	err := h.mods.eng.Close(context.Background())
	h.mods = nil
	return err
}

// moduleCache is a host's compiled modules by digest, shared by its runs:
// a module is compiled once, by the first run that needs it (runs that
// need it meanwhile wait for that compilation), and stays while runs use
// it and, idle, until MaxIdleModules more recently used ones push it out.
// A compiled module holds no guest state (each task is an instance of its
// own, with its own memory), so sharing one shares nothing between runs.
type moduleCache struct {
	eng     sandbox.Engine
	maxIdle int

	mu      sync.Mutex
	entries map[string]*cachedModule // by digest; protected by mu
	idle    list.List                // of *cachedModule with no user, least recently used first; protected by mu
	closed  bool                     // protected by mu
}

// cachedModule is one digest's entry.
type cachedModule struct {
	digest string
	ready  chan struct{} // closed once mod, err and canceled are set

	// Set once, with mu held, before ready is closed.
	mod sandbox.Module
	err error
	// retry: err is the compiling run's, not the module's alone (its ctx
	// ended, or its task's limits refused the module or ended the
	// compile), so a run waiting for it compiles under its own.
	retry bool

	// checked are the static limits the module was checked against
	// (with their defaults), with the outcome: a run under limits not
	// checked yet has the engine check them (protected by mu).
	checked map[sandbox.StaticLimits]error

	users int           // runs holding it (acquire, not yet release); protected by mu
	elem  *list.Element // in idle while users == 0; protected by mu
}

func newModuleCache(eng sandbox.Engine, maxIdle int) *moduleCache {
	return &moduleCache{eng: eng, maxIdle: maxIdle, entries: map[string]*cachedModule{}}
}

// acquire returns the compiled module of wasm, whose digest is digest,
// compiled under cfg (the CompileConfig of the task whose module it is),
// compiling it only when it is not cached; the caller releases it once it
// no longer runs it. A cached module is checked against cfg's static
// limits all the same: each run's task has its own. A compile error is
// the engine's, as is, and is not kept: the next run compiles again. A
// run waiting for another's compilation, which was stopped by that run's
// ctx or limits, compiles it itself.
func (c *moduleCache) acquire(ctx context.Context, wasm []byte, digest string, cfg sandbox.CompileConfig) (*cachedModule, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, errors.New("host: closed")
		}
		e := c.entries[digest]
		if e == nil {
			e = &cachedModule{digest: digest, ready: make(chan struct{}), users: 1}
			c.entries[digest] = e
			c.mu.Unlock()
			mod, err := compileDigest(ctx, c.eng, wasm, digest, cfg)
			c.mu.Lock()
			e.mod, e.err, e.retry = mod, err, err != nil && (ctx.Err() != nil || limitError(err))
			if err != nil {
				delete(c.entries, digest)
			} else {
				e.checked = map[sandbox.StaticLimits]error{cfg.Limits.WithDefaults(): nil}
			}
			c.mu.Unlock()
			close(e.ready)
			if err != nil {
				return nil, err
			}
			return e, nil
		}
		e.users++
		if e.elem != nil {
			c.idle.Remove(e.elem)
			e.elem = nil
		}
		c.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			c.release(e)
			return nil, ctx.Err()
		}
		switch {
		case e.err == nil:
			if err := c.check(ctx, e, wasm, cfg); err != nil {
				c.release(e)
				return nil, err
			}
			return e, nil
		case !e.retry:
			return nil, e.err // out of the cache already: nothing to release
		}
	}
}

// limitError reports whether err is a compile refused or ended by the
// compiling task's limits, which another task's may not be.
func limitError(err error) bool {
	return errors.Is(err, sandbox.ErrStaticLimit) || errors.Is(err, sandbox.ErrTimeout) || errors.Is(err, sandbox.ErrMemoryLimit)
}

// maxChecked bounds the static limits a cached module remembers checking.
const maxChecked = 16

// check checks the cached module e of wasm, compiled, against cfg's
// static limits, once for each distinct limits: the engine's CompileWith
// on bytes it has compiled returns the module it has (e holds it) after
// checking the module's counts against them.
func (c *moduleCache) check(ctx context.Context, e *cachedModule, wasm []byte, cfg sandbox.CompileConfig) error {
	l := cfg.Limits.WithDefaults()
	c.mu.Lock()
	err, ok := e.checked[l]
	c.mu.Unlock()
	if ok {
		return err
	}
	mod, err := c.eng.CompileWith(ctx, wasm, cfg)
	if err == nil {
		mod.Close(context.Background())
	}
	if err != nil && !errors.Is(err, sandbox.ErrStaticLimit) {
		return err // not the module's answer to l: not kept
	}
	c.mu.Lock()
	if len(e.checked) >= maxChecked {
		clear(e.checked)
	}
	e.checked[l] = err
	c.mu.Unlock()
	return err
}

// release ends a user's hold on e. An entry no run uses joins the idle
// list; past maxIdle, the least recently used idle ones are closed.
func (c *moduleCache) release(e *cachedModule) {
	c.mu.Lock()
	e.users--
	// In use (or compiling, for its first user), failed, or closed.
	if e.users > 0 || e.mod == nil || c.entries[e.digest] != e {
		c.mu.Unlock()
		return
	}
	e.elem = c.idle.PushBack(e)
	var evict []*cachedModule
	for c.idle.Len() > c.maxIdle {
		old := c.idle.Remove(c.idle.Front()).(*cachedModule)
		old.elem = nil
		delete(c.entries, old.digest)
		evict = append(evict, old)
	}
	c.mu.Unlock()
	for _, old := range evict {
		old.mod.Close(context.Background())
	}
}

// close closes every module in the cache. Preconditions: no run is left.
func (c *moduleCache) close() {
	c.mu.Lock()
	c.closed = true
	entries := c.entries
	c.entries = map[string]*cachedModule{}
	c.idle.Init()
	c.mu.Unlock()
	for _, e := range entries {
		if e.mod != nil {
			e.mod.Close(context.Background())
		}
	}
}

// len is the number of modules cached, in use or idle.
func (c *moduleCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// digestCompiler is an engine that takes a module's digest from its caller
// rather than hashing the module again (sandbox/wazero, sandbox/wasmtime):
// digest must be sandbox.Digest(wasm), as the host's is (from the module
// file's record, digestcache.go, or its own hash), and as the host's
// cache keys on it already.
type digestCompiler interface {
	CompileDigest(ctx context.Context, wasm []byte, digest string, cfg sandbox.CompileConfig) (sandbox.Module, error)
}

// compileDigest compiles wasm, of digest, on eng.
func compileDigest(ctx context.Context, eng sandbox.Engine, wasm []byte, digest string, cfg sandbox.CompileConfig) (sandbox.Module, error) {
	if dc, ok := eng.(digestCompiler); ok {
		return dc.CompileDigest(ctx, wasm, digest, cfg)
	}
	return eng.CompileWith(ctx, wasm, cfg)
}
