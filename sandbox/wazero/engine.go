// Package wazero is Mandate's default sandbox engine, built on the pure-Go
// WebAssembly runtime wazero (github.com/tetratelabs/wazero). It implements
// sandbox.Engine and sandbox.Module.
//
//	eng, err := wazero.New(ctx, sandbox.Config{CacheDir: dir})
//	if err != nil {
//		return err
//	}
//	defer eng.Close(ctx)
//	if err := eng.Host("mandate", hostFuncs); err != nil { // before any Compile
//		return err
//	}
//	mod, err := eng.Compile(ctx, wasm) // refuses unknown imports
//	if err != nil {
//		return err
//	}
//	defer mod.Close(ctx)
//	err = mod.Run(ctx, sandbox.RunConfig{
//		Name:        "task-1",
//		MemoryLimit: 64 << 20,
//		Timeout:     time.Second,
//		Stdout:      &out,
//	})
//	switch {
//	case errors.Is(err, sandbox.ErrTimeout):
//	case errors.Is(err, sandbox.ErrMemoryLimit):
//	}
//
// # What a guest gets
//
// Each Run is a fresh instance with nothing ambient: no preopened
// directories, no environment variables, argv is just RunConfig.Name, stdin
// is empty, no sockets. It does get the things the Go runtime needs to work
// at all: real wall and monotonic clocks, a sleep that wakes early when the
// run is stopped, and crypto/rand as its random source (wazero's default is a
// deterministic seed, which would make a guest's crypto/rand predictable).
//
// # Stopping
//
// Every module is rewritten at compile time (wasmbin.Preempt) so that each
// loop header and function entry tests a stop flag that Run sets when the
// run's context is done, and calls into Go every wasmbin.PreemptBudget
// units of work so the Go runtime can preempt a spinning guest: a guest in
// "for {}" stops at the deadline, and a garbage collection never waits for
// it (preempt.go). A guest blocked in time.Sleep is woken at the deadline
// too: each instance's nanosleep returns when the run's context is done.
// wazero's own WithCloseOnContextDone, used before, called into Go at every
// loop header and made a compute-bound guest 4.6-4.9x slower; the rewrite
// costs it 2-14% (BENCHMARKS.md).
//
// # Modules
//
// Compile refuses a module that imports anything but functions of the
// registered host modules and of wasi_snapshot_preview1 (with the right
// signatures), or that defines no memory. A module exporting _start is a
// Command; any other is a Reactor, entered by _initialize when exported and
// then by RunConfig.Entry. Compiling bytes already compiled returns the same
// compiled module. The data segments of the module are merged before
// compiling (see coalesce.go in sandbox/internal/wasmbin): Go binaries carry
// tens of thousands of them, which made every instantiation slow. Every
// table gets a maximum of max(its initial size, 10,000) elements
// (wasmbin.MaxTableElements), so a table.grow bomb gets -1 instead of
// gigabytes.
//
// # Memory
//
// RunConfig.MemoryLimit is enforced with wazero's experimental memory
// allocator hook: past the limit memory.grow returns -1. The Go runtime then
// dies with "out of memory" (exit code 2), and Run reports an *ExitError
// wrapping sandbox.ErrMemoryLimit.
package wazero

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/internal/wasmbin"
)

// Name is the engine's name.
const Name = "wazero"

// wasiModule is the WASI preview1 import module every Go wasip1 guest uses.
const wasiModule = wasi_snapshot_preview1.ModuleName

var (
	_ sandbox.Engine = (*Engine)(nil)
	_ sandbox.Module = (*Module)(nil)
)

// Engine is a wazero runtime with the WASI preview1 module and the host
// modules registered through Host. It is safe for concurrent use.
type Engine struct {
	rt       wazero.Runtime
	cache    wazero.CompilationCache // nil without Config.CacheDir
	cacheDir string                  // Config.CacheDir: snapshots go under it
	opt      options

	seq atomic.Uint64 // names instances uniquely

	mu sync.Mutex
	// imports maps an import module to its functions' signatures
	// (protected by mu; read-only once compiling has started).
	imports map[string]map[string]funcSig
	// compiling is set by the first Compile; Host refuses after it
	// (protected by mu).
	compiling bool
	// modules caches compiled modules by digest (protected by mu).
	modules map[string]*compiled
	closed  bool // protected by mu
}

// funcSig is an imported function's signature, as wazero types.
type funcSig struct {
	params, results string
}

func sigOf(def api.FunctionDefinition) funcSig {
	return funcSig{params: string(def.ParamTypes()), results: string(def.ResultTypes())}
}

func (s funcSig) String() string {
	f := func(ts string) string {
		out := "("
		for i := 0; i < len(ts); i++ {
			if i > 0 {
				out += ","
			}
			out += api.ValueTypeName(ts[i])
		}
		return out + ")"
	}
	return f(s.params) + "->" + f(s.results)
}

// options are settings not exposed through sandbox.Config.
type options struct {
	// preempt is how running guests are stopped (preempt.go), and
	// preemptBudget the rewrite's budget (0: wasmbin.PreemptBudget).
	preempt       preemption
	preemptBudget uint32
	// noCoalesce compiles the original bytes without merging data segments.
	noCoalesce bool
	// noSnapshot starts every task with _initialize (Config.NoSnapshots).
	noSnapshot bool
}

// New returns an engine with the WASI preview1 module instantiated. With
// cfg.CacheDir set, compiled code is kept there between processes.
func New(ctx context.Context, cfg sandbox.Config) (*Engine, error) {
	return newEngine(ctx, cfg, options{noSnapshot: cfg.NoSnapshots})
}

func newEngine(ctx context.Context, cfg sandbox.Config, opt options) (*Engine, error) {
	rc := wazero.NewRuntimeConfig(). // the compiler where supported
						WithCloseOnContextDone(opt.preempt == preemptCloseOnDone)
	var cache wazero.CompilationCache
	if cfg.CacheDir != "" {
		var err error
		cache, err = wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("sandbox/wazero: compilation cache: %w", err)
		}
		rc = rc.WithCompilationCache(cache)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	if err := instantiateYield(ctx, rt); err != nil {
		rt.Close(ctx)
		if cache != nil {
			cache.Close(ctx)
		}
		return nil, fmt.Errorf("sandbox/wazero: instantiating %s: %w", wasmbin.PreemptModule, err)
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		rt.Close(ctx)
		if cache != nil {
			cache.Close(ctx)
		}
		return nil, fmt.Errorf("sandbox/wazero: instantiating WASI: %w", err)
	}
	sigs := map[string]funcSig{}
	for name, def := range rt.Module(wasiModule).ExportedFunctionDefinitions() {
		sigs[name] = sigOf(def)
	}
	return &Engine{
		rt:       rt,
		cache:    cache,
		cacheDir: cfg.CacheDir,
		opt:      opt,
		imports:  map[string]map[string]funcSig{wasiModule: sigs},
		modules:  map[string]*compiled{},
	}, nil
}

// Name implements sandbox.Engine.
func (e *Engine) Name() string { return Name }

// Host implements sandbox.Engine: it instantiates an import module whose
// functions take Params i32s and return one i32. Each call passes Fn the
// context given to Module.Run and the caller's memory, without allocating. A
// panic in Fn becomes a trap of the calling instance.
func (e *Engine) Host(module string, funcs []sandbox.HostFunc) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
		return errors.New("sandbox/wazero: engine closed")
	case e.compiling:
		return fmt.Errorf("sandbox/wazero: Host(%q) after Compile", module)
	case module == wasmbin.PreemptModule:
		return fmt.Errorf("sandbox/wazero: host module name %q is reserved for the engine", module)
	case e.imports[module] != nil:
		return fmt.Errorf("sandbox/wazero: host module %q already registered", module)
	}
	if err := sandbox.CheckHost(module, funcs); err != nil {
		return fmt.Errorf("sandbox/wazero: %w", err)
	}
	b := e.rt.NewHostModuleBuilder(module)
	sigs := make(map[string]funcSig, len(funcs))
	for _, f := range funcs {
		params := make([]api.ValueType, f.Params)
		for i := range params {
			params[i] = api.ValueTypeI32
		}
		results := []api.ValueType{api.ValueTypeI32}
		sigs[f.Name] = funcSig{params: string(params), results: string(results)}
		b.NewFunctionBuilder().
			WithGoModuleFunction(hostAdapter(module, f), params, results).
			WithName(f.Name).
			Export(f.Name)
	}
	if _, err := b.Instantiate(context.Background()); err != nil {
		return fmt.Errorf("sandbox/wazero: host module %q: %w", module, err)
	}
	e.imports[module] = sigs
	return nil
}

// hostPanic is what a panicking host function traps with.
type hostPanic struct {
	fn  string
	val any
}

func (p *hostPanic) Error() string {
	return fmt.Sprintf("host function %s panicked: %v", p.fn, p.val)
}

// hostAdapter wraps f as a wazero function. The call path allocates
// nothing: mod.Memory() is wazero's *MemoryInstance, which satisfies
// sandbox.Memory, and the deferred recover is open-coded.
func hostAdapter(module string, f sandbox.HostFunc) api.GoModuleFunc {
	fn, qualified := f.Fn, module+"."+f.Name
	return func(ctx context.Context, mod api.Module, stack []uint64) {
		defer func() {
			if r := recover(); r != nil {
				// wazero recovers this panic and fails the call with it,
				// closing nothing else: the calling instance traps.
				panic(&hostPanic{fn: qualified, val: r})
			}
		}()
		fn(ctx, mod.Memory(), stack)
	}
}

// Compile implements sandbox.Engine. Compiling bytes that are already
// compiled returns the same underlying module; it is released when every
// Module returned for it is closed.
func (e *Engine) Compile(ctx context.Context, wasm []byte) (sandbox.Module, error) {
	digest := sandbox.Digest(wasm)

	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, errors.New("sandbox/wazero: engine closed")
	}
	e.compiling = true
	c := e.modules[digest]
	if c == nil {
		c = &compiled{eng: e, digest: digest, ready: make(chan struct{})}
		e.modules[digest] = c
		c.refs++
		e.mu.Unlock()
		c.err = e.compile(ctx, c, wasm)
		close(c.ready)
		if c.err != nil {
			e.mu.Lock()
			if e.modules[digest] == c {
				delete(e.modules, digest)
			}
			e.mu.Unlock()
			return nil, c.err
		}
		return &Module{c: c}, nil
	}
	c.refs++
	e.mu.Unlock()

	select {
	case <-c.ready:
	case <-ctx.Done():
		c.release(ctx)
		return nil, ctx.Err()
	}
	if c.err != nil {
		c.release(ctx)
		return nil, c.err
	}
	return &Module{c: c}, nil
}

// compile checks wasm's imports and compiles it into c.
func (e *Engine) compile(ctx context.Context, c *compiled, wasm []byte) error {
	bin, err := wasmbin.Parse(wasm)
	if err != nil {
		return fmt.Errorf("sandbox/wazero: invalid module: %w", err)
	}
	// e.imports is read-only now that compiling is set.
	if err := wasmbin.CheckImports(bin, e.imports); err != nil {
		return fmt.Errorf("sandbox/wazero: %w", err)
	}
	c.memMin = bin.MemMin << 16
	c.allExports = bin.Exports

	src := wasm
	if !e.opt.noCoalesce {
		if merged, ok := wasmbin.Coalesce(wasm, bin); ok {
			src = merged
		}
	}
	// wazero has no limit of its own on table.grow: cap every table.
	if src, err = wasmbin.CapTables(src, wasmbin.MaxTableElements); err != nil {
		return fmt.Errorf("sandbox/wazero: invalid module: %w", err)
	}
	// Before anything compiles the module, the snapshot's init included:
	// wazero allocates what the module's counts say before reading, and
	// the rewrite decodes every one of them (preempt.go).
	rewritten, err := e.preempt(src)
	if err != nil {
		return fmt.Errorf("sandbox/wazero: %w", err)
	}
	// A reactor starts from its snapshot when it has one (snapshot.go).
	_, init := bin.Exports["_initialize"]
	_, start := bin.Exports["_start"]
	if init && !start && !e.opt.noSnapshot {
		snap, err := e.snapshotOf(ctx, c.digest, src)
		switch {
		case err == nil:
			src = snap
			if sb, err := wasmbin.Parse(snap); err == nil {
				c.memMin = sb.MemMin << 16
			}
			c.snapshot = true
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			c.noSnapshot = err.Error()
		}
	}
	// What is compiled is what runs: a snapshot is rewritten too.
	if c.snapshot {
		if rewritten, err = e.preempt(src); err != nil {
			return fmt.Errorf("sandbox/wazero: %w", err)
		}
	}
	cm, err := e.rt.CompileModule(ctx, rewritten)
	if err != nil {
		return fmt.Errorf("sandbox/wazero: compile: %w", err)
	}
	for _, def := range cm.ImportedFunctions() {
		mod, name, _ := def.Import()
		want := e.imports[mod][name]
		if got := sigOf(def); got != want {
			cm.Close(ctx)
			return fmt.Errorf("sandbox/wazero: module imports %s.%s with signature %s, host has %s", mod, name, got, want)
		}
	}
	exports := cm.ExportedFunctions()
	_, hasStart := exports["_start"]
	_, c.hasInit = exports["_initialize"]
	if hasStart {
		c.kind = sandbox.Command
		if def := exports["_start"]; len(def.ParamTypes()) != 0 || len(def.ResultTypes()) != 0 {
			cm.Close(ctx)
			return errors.New("sandbox/wazero: _start must take and return nothing")
		}
	} else {
		c.kind = sandbox.Reactor
	}
	c.exports = exports
	c.cm = cm
	return nil
}

// Close implements sandbox.Engine: it closes every instance and compiled
// module and the compilation cache handle (the files stay on disk).
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.modules = map[string]*compiled{}
	e.mu.Unlock()
	err := e.rt.Close(ctx)
	if e.cache != nil {
		if cerr := e.cache.Close(ctx); err == nil {
			err = cerr
		}
	}
	return err
}
