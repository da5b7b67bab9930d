package wazero

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strconv"
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
	ready  chan struct{} // closed once err, cm and the fields below are set
	err    error

	cm      wazero.CompiledModule
	kind    sandbox.ModuleKind
	hasInit bool
	exports map[string]api.FunctionDefinition
	memMin  uint64 // initial memory in bytes
	// snapshot: tasks start from the module's pre-initialised snapshot;
	// noSnapshot says why they do not, for a reactor.
	snapshot   bool
	noSnapshot string
	// allExports is every export's kind, to explain a wrong entry.
	allExports map[string]byte

	refs int // protected by eng.mu
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
	if last && c.cm != nil {
		return c.cm.Close(ctx)
	}
	return nil
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

	limit := cfg.MemoryLimit
	if limit == 0 || limit > defaultMemoryLimit {
		limit = defaultMemoryLimit
	}
	if c.memMin > limit {
		return fmt.Errorf("sandbox/wazero: initial memory of %d bytes exceeds the limit of %d: %w",
			c.memMin, limit, sandbox.ErrMemoryLimit)
	}

	runCtx := ctx
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	var lim *memoryLimiter
	if limit < defaultMemoryLimit {
		lim = &memoryLimiter{limit: limit}
		if c.snapshot {
			lim.startup = c.memMin
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
	done := runCtx.Done()
	mc := baseConfig.
		WithName(name + "#" + strconv.FormatUint(c.eng.seq.Add(1), 10)).
		WithArgs(name).
		WithStdout(stdout).
		WithStderr(stderr).
		WithNanosleep(func(ns int64) { sleep(done, ns) })

	inst, err := instantiate(runCtx, c.eng.rt, c.cm, mc)
	if err != nil {
		return outcome(runCtx, err, lim)
	}
	defer inst.Close(context.Background())
	defer armStop(runCtx, inst)()

	if c.kind == sandbox.Command {
		_, err = inst.ExportedFunction("_start").Call(runCtx)
		return outcome(runCtx, err, lim)
	}
	if c.hasInit {
		if _, err = inst.ExportedFunction("_initialize").Call(runCtx); err != nil {
			return outcome(runCtx, err, lim)
		}
	}
	res, err := inst.ExportedFunction(entryName).Call(runCtx)
	if err != nil {
		return outcome(runCtx, err, lim)
	}
	if rt := entry.ResultTypes(); len(rt) == 1 && rt[0] == api.ValueTypeI32 && uint32(res[0]) != 0 {
		return &sandbox.ExitError{Code: uint32(res[0])}
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
