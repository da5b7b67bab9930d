package wazero

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/internal/wasmbin"
)

// defaultMemoryLimit is what RunConfig.MemoryLimit zero means: the whole
// 32-bit address space, which wazero enforces by itself.
const defaultMemoryLimit = 4 << 30

// maxTrapLen bounds the trap text kept in an ExitError (wazero appends the
// guest's stack trace).
const maxTrapLen = 4 << 10

// compiled is one compiled module shared by every Module handle Compile
// returned for the same bytes.
type compiled struct {
	eng    *Engine
	digest string
	ready  chan struct{} // closed once err and the fields below are set
	err    error

	kind    sandbox.ModuleKind
	exports map[string]api.FunctionDefinition
	// allExports is every export's kind, to explain a wrong entry.
	allExports map[string]byte
	// start is what the next task's instance is made from: the module as
	// compiled, until a snapshot taken by a task replaces it (taker).
	start atomic.Pointer[startForm]
	// taker takes the module's snapshot from a task's _initialize; nil
	// when the module has or can have none (snapshot.go).
	taker *snapshotTaker

	mu sync.Mutex
	// forms are every compiled form start has held, closed with the
	// module (a task may still run an older one); released is set once
	// they are (protected by mu).
	forms    []wazero.CompiledModule
	images   []*memImage
	released bool
	// noSnapshot says why a reactor's tasks do not start from a snapshot
	// (protected by mu).
	noSnapshot string

	refs int // protected by eng.mu
}

// startForm is one compiled form of a module and how its tasks start.
type startForm struct {
	cm     wazero.CompiledModule
	memMin uint64 // initial memory in bytes
	// snapshot: the form is the module's snapshot, which starts where
	// _initialize ended and exports none.
	snapshot bool
	hasInit  bool
	// image, for a snapshot compiled without its data segments, is the
	// memory its tasks start with (image.go).
	image *memImage
}

func (c *compiled) release(ctx context.Context) error {
	e := c.eng
	e.mu.Lock()
	c.refs--
	last := c.refs == 0
	if last && e.modules[c.digest] == c {
		delete(e.modules, c.digest)
	}
	e.mu.Unlock()
	if !last {
		return nil
	}
	c.mu.Lock()
	forms, images := c.forms, c.images
	c.forms, c.images, c.released = nil, nil, true
	c.mu.Unlock()
	for _, im := range images {
		im.close()
	}
	var err error
	for _, cm := range forms {
		if cerr := cm.Close(ctx); err == nil {
			err = cerr
		}
	}
	return err
}

// install makes f the form the next tasks start from, unless the module
// was released meanwhile; it reports whether it did.
func (c *compiled) install(f *startForm) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return false
	}
	c.forms = append(c.forms, f.cm)
	if f.image != nil {
		c.images = append(c.images, f.image)
	}
	c.start.Store(f)
	return true
}

// Module is a compiled module. Run may be called concurrently.
type Module struct {
	c      *compiled
	closed atomic.Bool
}

// Digest implements sandbox.Module.
func (m *Module) Digest() string { return m.c.digest }

// Kind implements sandbox.Module.
func (m *Module) Kind() sandbox.ModuleKind { return m.c.kind }

// Close implements sandbox.Module. Runs in progress are not affected.
func (m *Module) Close(ctx context.Context) error {
	if m.closed.Swap(true) {
		return nil
	}
	return m.c.release(ctx)
}

// baseConfig is the module configuration every instance starts from: no
// filesystem, no environment, empty stdin, no start functions (Run calls
// them itself so it can map their outcome), real clocks and crypto/rand.
var baseConfig = wazero.NewModuleConfig().
	WithStartFunctions().
	WithSysWalltime().
	WithSysNanotime().
	WithRandSource(rand.Reader)

// Run implements sandbox.Module. See the package documentation for what the
// instance is given. For a reactor, the entry function must take no
// parameters; if it returns a single i32, a non-zero value is reported as an
// *ExitError with that code.
func (m *Module) Run(ctx context.Context, cfg sandbox.RunConfig) error {
	c := m.c
	if m.closed.Load() {
		return errors.New("sandbox/wazero: module closed")
	}
	if err := ctx.Err(); err != nil {
		return ctxError(err)
	}

	var entry api.FunctionDefinition
	entryName := cfg.Entry
	if c.kind == sandbox.Reactor {
		if entryName == "" {
			entryName = sandbox.DefaultEntry
		}
		entry = c.exports[entryName]
		if entry == nil {
			return wasmbin.EntryError(c.allExports, "sandbox/wazero", c.digest, entryName)
		}
		if len(entry.ParamTypes()) != 0 {
			return fmt.Errorf("sandbox/wazero: entry %q takes parameters", entryName)
		}
	}

	f := c.start.Load()
	limit := cfg.MemoryLimit
	if limit == 0 || limit > defaultMemoryLimit {
		limit = defaultMemoryLimit
	}
	if f.memMin > limit {
		return fmt.Errorf("sandbox/wazero: initial memory of %d bytes exceeds the limit of %d: %w",
			f.memMin, limit, sandbox.ErrMemoryLimit)
	}

	runCtx := ctx
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	var lim *memoryLimiter
	if limit < defaultMemoryLimit || f.image != nil || !c.eng.opt.heapMemory {
		lim = &memoryLimiter{limit: limit, image: f.image, mapped: !c.eng.opt.heapMemory}
		if f.snapshot {
			lim.startup = f.memMin
		}
		runCtx = experimental.WithMemoryAllocator(runCtx, lim)
	}

	name := cfg.Name
	if name == "" {
		name = "guest"
	}
	stdout, stderr := cfg.Stdout, cfg.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	// A task whose _initialize may become the module's snapshot runs it
	// watched (snapshot.go), with the argv every task of a snapshot sees.
	var watch *initWatch
	args := name
	if f.hasInit && c.taker.open() {
		watch = &initWatch{}
		stdout, stderr = watch.Writer(stdout), watch.Writer(stderr)
		args = snapshotArgv
	} else if f.snapshot {
		args = snapshotArgv
	}
	done := runCtx.Done()
	mc := baseConfig.
		WithName(name + "#" + strconv.FormatUint(c.eng.seq.Add(1), 10)).
		WithArgs(args).
		WithStdout(stdout).
		WithStderr(stderr).
		WithNanosleep(func(ns int64) { sleep(done, ns) })

	inst, err := instantiate(runCtx, c.eng.rt, f.cm, mc)
	if err != nil {
		return outcome(runCtx, err, lim)
	}
	defer inst.Close(context.Background())
	defer armStop(runCtx, inst)()

	if c.kind == sandbox.Command {
		_, err = inst.ExportedFunction("_start").Call(runCtx)
		return outcome(runCtx, err, lim)
	}
	if f.hasInit {
		initCtx := runCtx
		if watch != nil {
			watch.Context = runCtx
			initCtx = watch
		}
		if _, err = inst.ExportedFunction("_initialize").Call(initCtx); err != nil {
			return outcome(runCtx, err, lim)
		}
		if watch != nil {
			c.taker.take(inst, watch, lim)
		}
	}
	res, err := inst.ExportedFunction(entryName).Call(runCtx)
	if err != nil {
		return outcome(runCtx, err, lim)
	}
	if rt := entry.ResultTypes(); len(rt) == 1 && rt[0] == api.ValueTypeI32 && uint32(res[0]) != 0 {
		ee := &sandbox.ExitError{Code: uint32(res[0])}
		if lim != nil && lim.refused.Load() {
			ee.Err = sandbox.ErrMemoryLimit
		}
		return ee
	}
	return nil
}

// instantiate is InstantiateModule that also turns a panic into an error:
// wazero panics when an allocator refuses the initial memory, which Run
// rules out beforehand, but a panic must never take the process down.
func instantiate(ctx context.Context, rt wazero.Runtime, cm wazero.CompiledModule, mc wazero.ModuleConfig) (inst api.Module, err error) {
	defer func() {
		if r := recover(); r != nil {
			inst, err = nil, fmt.Errorf("sandbox/wazero: instantiate: %v", r)
		}
	}()
	return rt.InstantiateModule(ctx, cm, mc)
}

// sleep is the guest's nanosleep: it wakes early when the run is stopped, so
// a guest blocked in time.Sleep still stops at its deadline.
func sleep(done <-chan struct{}, ns int64) {
	if ns <= 0 {
		return
	}
	t := time.NewTimer(time.Duration(ns))
	select {
	case <-t.C:
	case <-done:
		t.Stop()
	}
}

// outcome maps the error of an instantiation or a call to what Run reports.
func outcome(runCtx context.Context, err error, lim *memoryLimiter) error {
	if err == nil {
		return nil
	}
	var memErr error
	if lim != nil && lim.refused.Load() {
		memErr = sandbox.ErrMemoryLimit
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		code := exit.ExitCode()
		if code == 0 {
			return nil
		}
		// wazero reports a stop by the context with reserved exit codes;
		// trust them only when the context is really done, so a guest can
		// not fake a timeout with proc_exit.
		if ctxErr := runCtx.Err(); ctxErr != nil &&
			(code == sys.ExitCodeDeadlineExceeded || code == sys.ExitCodeContextCanceled) {
			return ctxError(ctxErr)
		}
		return &sandbox.ExitError{Code: code, Err: memErr}
	}
	if ctxErr := runCtx.Err(); ctxErr != nil && memErr == nil {
		return ctxError(ctxErr)
	}
	msg := err.Error()
	if len(msg) > maxTrapLen {
		msg = msg[:maxTrapLen] + "..."
	}
	return &sandbox.ExitError{Trap: msg, Err: memErr}
}

func ctxError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return sandbox.ErrTimeout
	}
	return sandbox.ErrCanceled
}
