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
// # Compiling
//
// wazero's compiler takes time and memory that no check on a module's size
// bounds (50,000 nested loops in 150 KB hold a core for minutes; 32 KB of
// functions with 50,000 locals each take gigabytes), so on Linux a module
// is compiled in a child process (sandbox/internal/isolate): the current
// executable started again, which bounds its own address space, CPU time
// and Go heap from CompileConfig.MemoryLimit and Timeout, and is killed
// when ctx is done or the timeout passes. A compile past them fails with
// ErrTimeout or ErrMemoryLimit (wrapped), a canceled one with ErrCanceled,
// and what the compile allocated never lives in this process. The child
// compiles the prepared bytes (merged, capped, rewritten) with a runtime
// configured exactly as the engine's (runtimeConfig: the same
// WithCloseOnContextDone, which is part of wazero's cache key) into wazero's
// compilation cache under the engine's cache directory, and the engine's
// runtime then loads it from there. Without Config.CacheDir the engine
// makes a private temporary cache directory, removed by Close.
//
// A cache hit starts no child: after a child's compile the engine writes a
// marker (mandate-compiled/ in the cache directory) for those bytes naming
// wazero's file, and a compile whose marker names a file that is there
// loads it directly. A marker whose file is gone (a pruned cache) starts a
// child again: the marker does not say under which limits the module
// compiled. On other systems modules are compiled in process, bounded by
// nothing but ctx.
//
// What a compile makes of a module before wazero sees it (its static
// counts, the merged, capped, snapshot and rewritten bytes, the marker's
// file) is kept by the original module's digest once the module's form is
// settled (cache.go): a later process's compile parses the module and
// checks its imports, then hands wazero the kept bytes, with no rewrite.
// wazero itself still decodes and validates them, and hashes them to find
// its compiled code.
//
// # Memory
//
// RunConfig.MemoryLimit is enforced with wazero's experimental memory
// allocator hook: past the limit memory.grow returns -1. The Go runtime then
// dies with "out of memory" (exit code 2), and Run reports an *ExitError
// wrapping sandbox.ErrMemoryLimit. The same hook backs every memory on
// Linux with a reservation of the limit, outside the Go heap: grown in
// place, never copied, and for a task started from a snapshot a private
// copy-on-write mapping of the snapshot's memory image (image.go), so a
// task pays only for the pages it touches.
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
	private  string                  // a temporary cacheDir, removed by Close (isolate.go)
	opt      options

	seq atomic.Uint64 // names instances uniquely

	// bg is work an engine does for its modules in the background (a
	// snapshot's compile), stopped by bgCtx's end and waited for by Close.
	bg       sync.WaitGroup
	bgCtx    context.Context
	bgCancel context.CancelFunc

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
	// static holds each module's static counts, checked against every
	// compile's limits (cfg.Limits), bytes already compiled included.
	static wasmbin.StaticCache
	// stats are the static counts of modules compiled from their prepared
	// records (cache.go), by digest (protected by mu).
	stats map[string]wasmbin.Stats
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
	// noDevirt keeps a module's function table rather than turning its
	// indirect calls into direct ones (wasmbin.Devirtualize; benchmarks).
	noDevirt bool
	// noSnapshot starts every task with _initialize (Config.NoSnapshots).
	noSnapshot bool
	// image is how a snapshot's memory reaches its tasks (image.go).
	image imageMode
	// heapMemory backs the memories of modules without a snapshot on the
	// Go heap, copied as they grow, rather than in a mapping (image.go).
	heapMemory bool
	// compileInProcess compiles in the calling process, bounded by
	// nothing but ctx (benchmarks only: isolate.go).
	compileInProcess bool
	// noPrepared keeps and uses no prepared records (cache.go): every
	// compile prepares the module again (tests and benchmarks).
	noPrepared bool
}

// New returns an engine with the WASI preview1 module instantiated. With
// cfg.CacheDir set, compiled code is kept there between processes.
func New(ctx context.Context, cfg sandbox.Config) (*Engine, error) {
	return newEngine(ctx, cfg, options{noSnapshot: cfg.NoSnapshots})
}

func newEngine(ctx context.Context, cfg sandbox.Config, opt options) (*Engine, error) {
	rc := runtimeConfig(opt.preempt == preemptCloseOnDone)
	cfg, private, err := privateCache(cfg, opt)
	if err != nil {
		return nil, err
	}
	var cache wazero.CompilationCache
	if cfg.CacheDir != "" {
		cache, err = wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			removePrivate(private)
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
		removePrivate(private)
		return nil, fmt.Errorf("sandbox/wazero: instantiating %s: %w", wasmbin.PreemptModule, err)
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		rt.Close(ctx)
		if cache != nil {
			cache.Close(ctx)
		}
		removePrivate(private)
		return nil, fmt.Errorf("sandbox/wazero: instantiating WASI: %w", err)
	}
	sigs := map[string]funcSig{}
	for name, def := range rt.Module(wasiModule).ExportedFunctionDefinitions() {
		sigs[name] = sigOf(def)
	}
	bgCtx, bgCancel := context.WithCancel(context.WithoutCancel(ctx))
	return &Engine{
		bgCtx:    bgCtx,
		bgCancel: bgCancel,
		rt:       rt,
		cache:    cache,
		cacheDir: cfg.CacheDir,
		private:  private,
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
		params := make([]api.ValueType, len(f.Params))
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
		if w, ok := ctx.(*initWatch); ok {
			w.touch(qualified) // a call from _initialize: no snapshot of it
		}
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
	return e.CompileWith(ctx, wasm, sandbox.CompileConfig{})
}

// CompileWith implements sandbox.Engine.
func (e *Engine) CompileWith(ctx context.Context, wasm []byte, cfg sandbox.CompileConfig) (sandbox.Module, error) {
	return e.CompileDigest(ctx, wasm, sandbox.Digest(wasm), cfg)
}

// CompileDigest is CompileWith for a caller that has the module's digest
// already (the host, whose module files' digests are kept while the files
// are unchanged): digest must be sandbox.Digest(wasm). The engine finds
// compiled modules, kept counts and cache files by it, so another digest
// would run another module's code.
func (e *Engine) CompileDigest(ctx context.Context, wasm []byte, digest string, cfg sandbox.CompileConfig) (sandbox.Module, error) {
	// Before anything reads the module's counts, and for bytes already
	// compiled too (each task has its own limits): its static limits,
	// from the module's prepared record when it has one (cache.go).
	rec, err := e.checkStatic(digest, wasm, cfg.Limits)
	if errors.Is(err, sandbox.ErrStaticLimit) {
		return nil, fmt.Errorf("sandbox/wazero: %w", err)
	} else if err != nil {
		return nil, fmt.Errorf("sandbox/wazero: invalid module: %w", err)
	}

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
		c.err = e.compile(ctx, c, wasm, cfg, rec)
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

// compile checks wasm's imports and compiles it into c: what rec, its
// prepared record (nil: none), says when it has one.
func (e *Engine) compile(ctx context.Context, c *compiled, wasm []byte, cfg sandbox.CompileConfig, rec *prepared) error {
	bin, err := wasmbin.Parse(wasm)
	if err != nil {
		return fmt.Errorf("sandbox/wazero: invalid module: %w", err)
	}
	// e.imports is read-only now that compiling is set.
	if err := wasmbin.CheckImports(bin, e.imports); err != nil {
		return fmt.Errorf("sandbox/wazero: %w", err)
	}
	c.allExports = bin.Exports
	if rec != nil {
		err := e.compilePrepared(ctx, c, rec, cfg)
		if err == nil || ctx.Err() != nil {
			return err
		}
		// Not what the record says: prepared again, the record rewritten.
		c.noSnapshot = ""
	}
	memMin := bin.MemMin << 16

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
	// A reactor starts from its snapshot when it has one, or may get one
	// from its first task's _initialize (snapshot.go).
	snapshot := false
	var image *memImage // the memory tasks start from, when not in data segments (image.go)
	var imgData *imageData
	installed := false
	defer func() {
		if image != nil && !installed {
			image.close()
		}
	}()
	_, init := bin.Exports["_initialize"]
	_, start := bin.Exports["_start"]
	if init && !start && !e.opt.noSnapshot {
		snap, taker, why := e.snapshotOf(c, src, cfg)
		switch {
		case snap != nil:
			snapshot = true
			if sb, err := wasmbin.Parse(snap); err == nil {
				memMin = sb.MemMin << 16
			}
			src, image, imgData = e.splitImage(snap)
		case taker != nil:
			src, c.taker = taker.variant, taker
		default:
			c.noSnapshot = why
		}
	} else if init && !start {
		c.noSnapshot = "snapshots are off (Config.NoSnapshots)"
	}
	// A module that starts from no snapshot (one built elsewhere than by
	// mandate build, a Rust or C tool) starts from its data segments: they
	// are its image, mapped as a snapshot's is, and its finished tasks'
	// memories are pooled. Not a module whose first task may take its
	// snapshot: that form runs once, then the snapshot's image replaces it.
	if !snapshot && c.taker == nil && bin.HasMem && memMin <= maxPlainImage {
		src, image, imgData = e.splitImage(src)
	}
	// Before anything compiles the module: wazero allocates what the
	// module's counts say before reading, and the rewrite decodes every
	// one of them (preempt.go). What is compiled is what runs.
	rewritten, err := e.rewrite(src)
	if err != nil {
		return fmt.Errorf("sandbox/wazero: %w", err)
	}
	// In a child process bounded by cfg when it is not in the cache
	// (isolate.go).
	cm, err := e.compileBounded(ctx, e.rt, e.opt.preempt == preemptCloseOnDone, rewritten, cfg)
	if err != nil {
		return fmt.Errorf("sandbox/wazero: compile: %w", err)
	}
	if installed, err = e.finishCompile(ctx, c, cm, &startForm{cm: cm, memMin: memMin, snapshot: snapshot, image: image}); err != nil {
		return err
	}
	if c.taker == nil {
		// Settled: kept for the next process (cache.go).
		p := &prepared{code: rewritten}
		p.MemMin, p.Snapshot, p.NoSnapshot = memMin, snapshot, c.noSnapshot
		if image != nil {
			p.image = imgData
		}
		e.storePrepared(c.digest, wasm, bin, p)
	}
	return nil
}

// compilePrepared compiles into c what the module's record rec says.
func (e *Engine) compilePrepared(ctx context.Context, c *compiled, rec *prepared, cfg sandbox.CompileConfig) error {
	var image *memImage
	if rec.image != nil {
		image = newMemImage(rec.image, e.opt.image == imageCopy)
	}
	var cm wazero.CompiledModule
	var err error
	if rec.Marker != "" && e.cacheFileOK(rec.Marker) {
		// What a child compiled before: no child, and no marker to hash.
		cm, err = e.rt.CompileModule(ctx, rec.code)
	} else {
		cm, err = e.compileBounded(ctx, e.rt, e.opt.preempt == preemptCloseOnDone, rec.code, cfg)
	}
	if err != nil {
		if image != nil {
			image.close()
		}
		return fmt.Errorf("sandbox/wazero: compile: %w", err)
	}
	c.noSnapshot = rec.NoSnapshot
	if preparedHit != nil {
		preparedHit(c.digest)
	}
	installed, err := e.finishCompile(ctx, c, cm, &startForm{cm: cm, memMin: rec.MemMin, snapshot: rec.Snapshot, image: image})
	if !installed && image != nil {
		image.close()
	}
	return err
}

// finishCompile checks cm, compiled for c, against the host's functions,
// records c's kind and exports, and installs f (its cm) as c's start form.
// It reports whether c took f; it closes cm when it fails.
func (e *Engine) finishCompile(ctx context.Context, c *compiled, cm wazero.CompiledModule, f *startForm) (bool, error) {
	for _, def := range cm.ImportedFunctions() {
		mod, name, _ := def.Import()
		want := e.imports[mod][name]
		if got := sigOf(def); got != want {
			cm.Close(ctx)
			return false, fmt.Errorf("sandbox/wazero: module imports %s.%s with signature %s, host has %s", mod, name, got, want)
		}
	}
	exports := cm.ExportedFunctions()
	_, hasStart := exports["_start"]
	_, hasInit := exports["_initialize"]
	if hasStart {
		c.kind = sandbox.Command
		if def := exports["_start"]; len(def.ParamTypes()) != 0 || len(def.ResultTypes()) != 0 {
			cm.Close(ctx)
			return false, errors.New("sandbox/wazero: _start must take and return nothing")
		}
	} else {
		c.kind = sandbox.Reactor
	}
	c.exports = exports
	f.hasInit = hasInit
	return c.install(f), nil
}

// goBackground runs fn on a goroutine of its own, with a context that ends
// when the engine closes; it reports false, running nothing, when the
// engine is closed.
func (e *Engine) goBackground(fn func(ctx context.Context)) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		fn(e.bgCtx)
	}()
	return true
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
	e.bgCancel()
	e.bg.Wait()
	err := e.rt.Close(ctx)
	if e.cache != nil {
		if cerr := e.cache.Close(ctx); err == nil {
			err = cerr
		}
	}
	removePrivate(e.private)
	return err
}
