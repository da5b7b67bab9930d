//go:build wasmtime

package wasmtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	wt "github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/internal/snapstate"
	"github.com/mandatevm/mandate/sandbox/internal/wasmbin"
)

// Name is the engine's name.
const Name = "wasmtime"

// wasiModule is the WASI preview1 import module every Go wasip1 guest uses.
const wasiModule = "wasi_snapshot_preview1"

// MaxTableElements is how far a guest's table may grow: a table.grow past
// max(the table's initial size, MaxTableElements) elements returns -1. A Go
// guest never grows its table (its initial size is the number of functions
// called indirectly, about 1,000 to 10,000), so the cap only stops a
// table.grow bomb from allocating gigabytes. sandbox/wazero applies the
// same cap.
const MaxTableElements = wasmbin.MaxTableElements

var (
	_ sandbox.Engine = (*Engine)(nil)
	_ sandbox.Module = (*Module)(nil)
)

// Engine is a wasmtime engine with a linker holding this package's WASI
// preview1 functions and the host modules registered through Host. It is
// safe for concurrent use.
type Engine struct {
	wt     *wt.Engine
	linker *wt.Linker
	opt    options
	cache  *diskCache // nil without Config.CacheDir
	// pool counts the instances of an engine with the pooling allocator;
	// nil with the on-demand allocator.
	pool *slots

	// closeCtx is canceled by Close, which stops every run in progress.
	closeCtx   context.Context
	closeStop  context.CancelFunc
	running    sync.WaitGroup // runs in progress; Add only with mu held and !closed
	start      time.Time      // the origin of guests' monotonic clock
	configDesc string         // the engine settings, part of the cache key

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
	// handles are the host functions' places in hostFuncs (define),
	// given back by release (protected by mu).
	handles []uintptr
}

// preemption is how a running guest is stopped.
type preemption int

const (
	// preemptEpoch: compiled code checks the engine's epoch at function
	// entries and loop headers; stopping a run bumps the epoch, and the
	// store's epoch callback ends the run whose stop flag is set (see
	// interrupt.go). The default.
	preemptEpoch preemption = iota
	// preemptNone: no check at all. A spinning guest can not be stopped
	// (benchmarks only).
	preemptNone
	// preemptFuel: compiled code counts fuel; each run gets the maximum
	// fuel. Fuel bounds instructions, not time, and wasmtime-go can not
	// stop a run from another goroutine with it, so a spinning guest is
	// not stopped at its deadline either (benchmarks only: it measures
	// what fuel metering costs).
	preemptFuel
)

func (p preemption) String() string {
	switch p {
	case preemptNone:
		return "none"
	case preemptFuel:
		return "fuel"
	}
	return "epoch"
}

// options are settings not exposed through sandbox.Config.
type options struct {
	preempt preemption
	// noCoalesce compiles the original bytes without merging data segments.
	noCoalesce bool
	// noSnapshot starts every task of a reactor with its _initialize
	// (Config.NoSnapshots).
	noSnapshot bool
	// noTrackGrowth compiles the module without routing memory.grow
	// through wasmbin.TrackGrowth's function, so a refused growth is never
	// reported as the memory limit (benchmarks only: it measures what the
	// rewrite costs).
	noTrackGrowth bool
	// onDemand maps every instance's memory and tables afresh (wasmtime's
	// on-demand allocator) instead of taking them from the pool (pool.go):
	// AllocatorEnv=ondemand, and what New falls back to when the pool's
	// address space can not be reserved.
	onDemand bool
	// poolInstances is the pool's size; 0 means PoolInstances (tests).
	poolInstances uint32
	// compileInProcess compiles in the calling process, bounded by
	// nothing but ctx (benchmarks only: isolate.go).
	compileInProcess bool
}

// funcSig is a function signature: its parameter and result kinds.
type funcSig struct {
	params, results string // one byte per value: 'i' i32, 'I' i64, 'f' f32, 'F' f64, 'r' a reference
}

func (s funcSig) String() string {
	f := func(ts string) string {
		out := "("
		for i := 0; i < len(ts); i++ {
			if i > 0 {
				out += ","
			}
			switch ts[i] {
			case 'i':
				out += "i32"
			case 'I':
				out += "i64"
			case 'f':
				out += "f32"
			case 'F':
				out += "f64"
			default:
				out += "ref"
			}
		}
		return out + ")"
	}
	return f(s.params) + "->" + f(s.results)
}

func kindCode(k wt.ValKind) byte {
	switch k {
	case wt.KindI32:
		return 'i'
	case wt.KindI64:
		return 'I'
	case wt.KindF32:
		return 'f'
	case wt.KindF64:
		return 'F'
	}
	return 'r'
}

func sigOf(ft *wt.FuncType) funcSig {
	var p, r []byte
	for _, v := range ft.Params() {
		p = append(p, kindCode(v.Kind()))
	}
	for _, v := range ft.Results() {
		r = append(r, kindCode(v.Kind()))
	}
	return funcSig{params: string(p), results: string(r)}
}

func valTypes(sig string) []*wt.ValType {
	out := make([]*wt.ValType, len(sig))
	for i := 0; i < len(sig); i++ {
		k := wt.KindI32
		if sig[i] == 'I' {
			k = wt.KindI64
		}
		out[i] = wt.NewValType(k)
	}
	return out
}

func (s funcSig) funcType() *wt.FuncType {
	return wt.NewFuncType(valTypes(s.params), valTypes(s.results))
}

// New returns an engine with the WASI preview1 functions defined. With
// cfg.CacheDir set, compiled modules are kept there between processes.
func New(ctx context.Context, cfg sandbox.Config) (*Engine, error) {
	onDemand, err := allocatorFromEnv()
	if err != nil {
		return nil, err
	}
	return newEngine(ctx, cfg, options{noSnapshot: cfg.NoSnapshots, onDemand: onDemand})
}

func newEngine(_ context.Context, cfg sandbox.Config, opt options) (*Engine, error) {
	switch {
	case !layoutOK:
		return nil, errors.New("sandbox/wasmtime: this wasmtime-go's Store or Config does not start with its C pointer; update interrupt.go")
	case !viewLayoutOK || !hostcallLayoutOK:
		return nil, errors.New("sandbox/wasmtime: this wasmtime-go's Caller, Memory, Linker or FuncType is not laid out as view.go and hostcall_c.go assume; update them")
	case !linked || !viewLinked || !hostcallLinked || !poolLinked:
		return nil, errors.New("sandbox/wasmtime: the wasmtime C API functions interrupt.go, view.go, hostcall_c.go and pool.go declare are not linked in")
	}
	// The pool, unless its address space can not be reserved.
	poolInstances := opt.poolInstances
	if poolInstances == 0 {
		poolInstances = PoolInstances
	}
	var pool *slots
	if opt.onDemand || !poolFits(poolInstances) {
		poolInstances = 0
	} else {
		pool = &slots{max: int32(poolInstances)}
	}
	eng := wt.NewEngineWithConfig(wasmtimeConfig(opt.preempt, poolInstances))
	e := &Engine{
		pool:    pool,
		wt:      eng,
		linker:  wt.NewLinker(eng),
		opt:     opt,
		imports: map[string]map[string]funcSig{},
		modules: map[string]*compiled{},
		start:   time.Now(),
		// Everything that changes the compiled code: a change here must
		// change the cache key (cache.go).
		configDesc: fmt.Sprintf("preempt=%s coalesce=%t tables=%d growth=%t snapshot=%t", opt.preempt, !opt.noCoalesce, MaxTableElements, !opt.noTrackGrowth, !opt.noSnapshot),
	}
	e.closeCtx, e.closeStop = context.WithCancel(context.Background())
	sigs, err := e.defineWASI()
	if err != nil {
		e.release()
		return nil, fmt.Errorf("sandbox/wasmtime: defining WASI: %w", err)
	}
	e.imports[wasiModule] = sigs
	if cfg.CacheDir != "" {
		if e.cache, err = openCache(cfg.CacheDir, e.configDesc); err != nil {
			e.release()
			return nil, fmt.Errorf("sandbox/wasmtime: compilation cache: %w", err)
		}
	}
	return e, nil
}

// release frees the linker, the wasmtime engine and the host functions'
// handles, once nothing runs.
func (e *Engine) release() {
	e.linker.Close()
	e.wt.Close()
	for _, h := range e.handles {
		hostFuncs.put(h)
	}
	e.handles = nil
}

// Name implements sandbox.Engine.
func (e *Engine) Name() string { return Name }

// Host implements sandbox.Engine: it defines an import module whose
// functions take Params i32s and return one i32. Each call passes Fn the
// context given to Module.Run and the caller's memory. A panic in Fn
// becomes a trap of the calling task.
func (e *Engine) Host(module string, funcs []sandbox.HostFunc) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
		return errors.New("sandbox/wasmtime: engine closed")
	case e.compiling:
		return fmt.Errorf("sandbox/wasmtime: Host(%q) after Compile", module)
	case e.imports[module] != nil:
		return fmt.Errorf("sandbox/wasmtime: host module %q already registered", module)
	}
	// Define only once every function checked out, so a refused
	// registration leaves nothing behind in the linker.
	if err := sandbox.CheckHost(module, funcs); err != nil {
		return fmt.Errorf("sandbox/wasmtime: %w", err)
	}
	sigs := make(map[string]funcSig, len(funcs))
	for _, f := range funcs {
		params := make([]byte, len(f.Params))
		for i := range params {
			params[i] = 'i'
		}
		sig := funcSig{params: string(params), results: "i"}
		sigs[f.Name] = sig
		if err := e.define(module, f.Name, sig, hostCall(module, f)); err != nil {
			return fmt.Errorf("sandbox/wasmtime: host function %s.%s: %w", module, f.Name, err)
		}
	}
	e.imports[module] = sigs
	return nil
}

// hostCall is f as a host function: its i32 parameters on the run's stack,
// the run's view of the guest memory, its result as the i32 it returns. A
// panic in f becomes a trap of the calling task.
func hostCall(module string, f sandbox.HostFunc) *hostFunc {
	fn, params := f.Fn, len(f.Params)
	what, qualified := "host function "+module+"."+f.Name, module+"."+f.Name
	return &hostFunc{what: what, call: func(r *run, caller unsafe.Pointer, vals []rawVal) unsafe.Pointer {
		if r.watch != nil {
			r.watch.touch(qualified) // a call from _initialize: no snapshot of it
		}
		stack := r.stack[:max(params, 1)]
		for i := range params {
			stack[i] = uint64(vals[i].u32())
		}
		if params == 0 {
			stack[0] = 0
		}
		r.mem.b = r.memoryView(caller)
		fn(r.ctx, &r.mem, stack)
		r.mem.b = nil
		vals[0].setI32(uint32(stack[0]))
		return nil
	}}
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
	// with the counts the cache keeps (cache.go).
	if err := e.checkStatic(digest, wasm, cfg.Limits); errors.Is(err, sandbox.ErrStaticLimit) {
		return nil, fmt.Errorf("sandbox/wasmtime: %w", err)
	} else if err != nil {
		return nil, fmt.Errorf("sandbox/wasmtime: invalid module: %w", err)
	}

	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, errors.New("sandbox/wasmtime: engine closed")
	}
	e.compiling = true
	c := e.modules[digest]
	if c == nil {
		c = &compiled{eng: e, digest: digest, ready: make(chan struct{})}
		e.modules[digest] = c
		c.refs++
		e.mu.Unlock()
		c.err = e.compile(ctx, c, wasm, cfg)
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
		c.release()
		return nil, ctx.Err()
	}
	if c.err != nil {
		c.release()
		return nil, c.err
	}
	return &Module{c: c}, nil
}

// compile checks wasm's imports and compiles it into c, through the disk
// cache.
func (e *Engine) compile(ctx context.Context, c *compiled, wasm []byte, cfg sandbox.CompileConfig) error {
	bin, err := wasmbin.Parse(wasm)
	if err != nil {
		return fmt.Errorf("sandbox/wasmtime: invalid module: %w", err)
	}
	// e.imports is read-only now that compiling is set.
	if err := wasmbin.CheckImports(bin, e.imports); err != nil {
		return fmt.Errorf("sandbox/wasmtime: %w", err)
	}
	// Checked here too, not only by TrackGrowth: a module from the cache
	// is not rewritten again.
	if err := wasmbin.ReservedExport(bin); err != nil {
		return fmt.Errorf("sandbox/wasmtime: %w", err)
	}
	c.allExports = bin.Exports
	c.tables = bin.Tables
	c.tableLimit = max(uint64(MaxTableElements), bin.TableMin)
	memMin := bin.MemMin << 16
	_, init := bin.Exports["_initialize"]
	_, start := bin.Exports["_start"]

	// A reactor starts from its snapshot when the cache has it, or may get
	// one from its first task's _initialize (snapshot.go).
	mod := e.cache.load(c.digest, e.wt)
	snapshot := init && !start && mod != nil && !exportsInit(mod)
	if init && !start && !snapshot && !e.opt.noSnapshot {
		// A snapshot kept by a process that ended before compiling it.
		if snap, ok := e.cache.loadSnapshot(c.digest); ok {
			sm, err := e.compileBounded(ctx, c.digest, snap, cfg)
			switch {
			case err == nil:
				if mod != nil {
					mod.Close()
				}
				mod, snapshot = sm, true
			case ctx.Err() != nil:
				if mod != nil {
					mod.Close()
				}
				return err
			default:
				e.cache.dropSnapshot(c.digest)
			}
		}
	}
	wantTaker := false
	switch {
	case !init || start || snapshot:
	case e.opt.noSnapshot:
		c.noSnapshot = "snapshots are off (Config.NoSnapshots)"
	default:
		if why, ok := e.cache.refusal(c.digest); ok {
			c.noSnapshot = why
		} else {
			wantTaker = true
		}
	}
	if mod == nil || wantTaker {
		src, err := e.prepare(wasm, bin)
		if err != nil {
			return err
		}
		if wantTaker {
			variant, globals, err := wasmbin.ExportGlobals(src)
			if err != nil {
				c.noSnapshot = err.Error()
				if errors.Is(err, wasmbin.ErrNoSnapshot) {
					e.cache.refuse(c.digest, err.Error())
				}
			} else {
				c.taker = &snapshotTaker{c: c, src: src, globals: globals, cfg: cfg, Taker: snapstate.NewTaker()}
				src = variant
			}
		}
		// In a child process bounded by cfg, into the cache (isolate.go).
		if mod == nil {
			if mod, err = e.compileBounded(ctx, c.digest, src, cfg); err != nil {
				return err
			}
		}
	}
	if err := c.describe(mod, e.imports); err != nil {
		mod.Close()
		return err
	}
	if snapshot {
		memMin = memoryMin(mod, memMin)
	}
	c.install(&startForm{mod: mod, memMin: memMin, snapshot: snapshot, hasInit: exportsInit(mod)})
	return nil
}

// prepare returns wasm as it is compiled: its data segments merged, its
// tables capped and its memory growth tracked.
func (e *Engine) prepare(wasm []byte, bin *wasmbin.Module) ([]byte, error) {
	src := wasm
	if !e.opt.noCoalesce {
		if merged, ok := wasmbin.Coalesce(wasm, bin); ok {
			src = merged
		}
	}
	src, err := wasmbin.CapTables(src, MaxTableElements)
	if err != nil {
		return nil, fmt.Errorf("sandbox/wasmtime: invalid module: %w", err)
	}
	if !e.opt.noTrackGrowth {
		// Every memory.grow records a refused growth (outcome reads it).
		if src, _, err = wasmbin.TrackGrowth(src); err != nil {
			return nil, fmt.Errorf("sandbox/wasmtime: rewriting memory.grow: %w", err)
		}
	}
	return src, nil
}

// exportsInit reports whether mod exports _initialize: a reactor's
// compiled form without it is its snapshot.
func exportsInit(mod *wt.Module) bool {
	for _, ex := range mod.Exports() {
		if ex.Name() == "_initialize" && ex.Type().FuncType() != nil {
			return true
		}
	}
	return false
}

// memoryMin is the initial size in bytes of mod's exported memory, or def.
func memoryMin(mod *wt.Module, def uint64) uint64 {
	for _, ex := range mod.Exports() {
		if mt := ex.Type().MemoryType(); mt != nil && ex.Name() == "memory" {
			return mt.Minimum() << 16
		}
	}
	return def
}

// describe checks mod's imported signatures against the host's and records
// its kind and exports.
func (c *compiled) describe(mod *wt.Module, imports map[string]map[string]funcSig) error {
	for _, imp := range mod.Imports() {
		name := ""
		if n := imp.Name(); n != nil {
			name = *n
		}
		ft := imp.Type().FuncType()
		if ft == nil {
			return fmt.Errorf("sandbox/wasmtime: module imports %s.%s: only functions may be imported", imp.Module(), name)
		}
		want, ok := imports[imp.Module()][name]
		if !ok {
			return fmt.Errorf("sandbox/wasmtime: module imports %s.%s: not a host function", imp.Module(), name)
		}
		if got := sigOf(ft); got != want {
			return fmt.Errorf("sandbox/wasmtime: module imports %s.%s with signature %s, host has %s", imp.Module(), name, got, want)
		}
	}
	c.exports = map[string]funcSig{}
	for _, ex := range mod.Exports() {
		if ft := ex.Type().FuncType(); ft != nil {
			c.exports[ex.Name()] = sigOf(ft)
		}
	}
	start, hasStart := c.exports["_start"]
	init, hasInit := c.exports["_initialize"]
	if hasStart {
		c.kind = sandbox.Command
		if start != (funcSig{}) {
			return errors.New("sandbox/wasmtime: _start must take and return nothing")
		}
	} else {
		c.kind = sandbox.Reactor
		if hasInit && init != (funcSig{}) {
			return errors.New("sandbox/wasmtime: _initialize must take and return nothing")
		}
	}
	return nil
}

// goBackground runs fn on a goroutine of its own, counted among the runs
// Close waits for; it reports false, running nothing, when the engine is
// closed.
func (e *Engine) goBackground(fn func()) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.running.Add(1)
	go func() {
		defer e.running.Done()
		fn()
	}()
	return true
}

// Close implements sandbox.Engine: it stops every run in progress (they
// return sandbox.ErrCanceled), waits for them, and releases the engine.
// Compiled modules stay on disk.
func (e *Engine) Close(context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	mods := e.modules
	e.modules = map[string]*compiled{}
	e.mu.Unlock()
	e.closeStop()
	e.running.Wait()
	for _, c := range mods {
		c.closeModule()
	}
	e.mu.Lock()
	e.release()
	e.mu.Unlock()
	return nil
}
