//go:build wasmtime

package wasmtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	wt "github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/internal/wasmbin"
)

// defaultMemoryLimit is what RunConfig.MemoryLimit zero means: the whole
// 32-bit address space.
const defaultMemoryLimit = 4 << 30

// maxTrapLen bounds the trap text kept in an ExitError (wasmtime appends
// the guest's stack trace).
const maxTrapLen = 4 << 10

// compiled is one compiled module shared by every Module handle Compile
// returned for the same bytes.
type compiled struct {
	eng    *Engine
	digest string
	ready  chan struct{} // closed once err, mod and the fields below are set
	err    error

	kind       sandbox.ModuleKind
	exports    map[string]funcSig
	allExports map[string]byte // every export's kind, to explain a wrong entry
	tables     int             // tables the module defines
	tableLimit uint64          // elements a table may reach
	// start is what the next task's instance is made from: the module as
	// compiled, until a snapshot taken by a task replaces it (taker).
	start atomic.Pointer[startForm]
	// taker takes the module's snapshot from a task's _initialize; nil
	// when the module has or can have none (snapshot.go).
	taker *snapshotTaker

	mu sync.Mutex
	// forms are every compiled form start has held, closed with the
	// module; released is set once they are (protected by mu).
	forms    []*wt.Module
	released bool
	// noSnapshot says why a reactor's tasks do not start from a snapshot
	// (protected by mu).
	noSnapshot string

	refs int // handles and runs in progress; protected by eng.mu
}

// startForm is one compiled form of a module and how its tasks start.
type startForm struct {
	mod    *wt.Module
	memMin uint64 // initial memory in bytes
	// snapshot: the form is the module's snapshot, which starts where
	// _initialize ended and exports none.
	snapshot bool
	hasInit  bool
}

// install makes f the form the next tasks start from, unless the module
// was released meanwhile; it reports whether it did.
func (c *compiled) install(f *startForm) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return false
	}
	c.forms = append(c.forms, f.mod)
	c.start.Store(f)
	return true
}

func (c *compiled) release() {
	e := c.eng
	e.mu.Lock()
	c.refs--
	last := c.refs == 0
	if last && e.modules[c.digest] == c {
		delete(e.modules, c.digest)
	}
	e.mu.Unlock()
	if last {
		c.closeModule()
	}
}

func (c *compiled) closeModule() {
	c.mu.Lock()
	forms := c.forms
	c.forms, c.released = nil, true
	c.mu.Unlock()
	for _, mod := range forms {
		mod.Close()
	}
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
func (m *Module) Close(context.Context) error {
	if m.closed.Swap(true) {
		return nil
	}
	m.c.release()
	return nil
}

// run is the state of one Run, reachable from host functions through the
// store's data.
type run struct {
	ctx  context.Context // the run's context, passed to host functions
	name string
	// watch is set while the run's _initialize may become the module's
	// snapshot: host functions and output note themselves (snapshot.go).
	watch          *initWatch
	stdout, stderr io.Writer
	closedFDs      [3]bool // stdio descriptors the guest closed

	// exited and exitCode record a proc_exit; trapMsg a trap raised by a
	// host function (a panic, or the run being stopped while in the host).
	exited   bool
	exitCode uint32
	trapMsg  string

	// pending is a trap (newTrap) a WASI function raised instead of
	// returning.
	pending unsafe.Pointer
	start   time.Time // the origin of the monotonic clock

	// guestMem is the instance's exported memory "memory", looked up once
	// when instantiation returns (memLooked) and valid for the store's life;
	// nil when the module exports none. Host calls made before (from a start
	// function) look it up themselves. Only the handle is kept: the bytes
	// are re-read at every host call (memoryView), since memory.grow may
	// move them.
	guestMem  *wt.Memory
	memLooked bool

	// storeKey and storeCtx are the store's data and context (register);
	// published is set while guestMem is in mandate_mem_tab at storeKey
	// (publishMemory). viewed is set by mandateHostCall when the C side
	// read the calling instance's memory for the call, then view is its
	// bytes, for memoryView to take.
	storeKey  uintptr
	storeCtx  unsafe.Pointer
	published bool
	viewed    bool
	view      []byte

	// mem and stack are the host calls' scratch, reused by every call of
	// the run (calls of one run never overlap), so that a call allocates
	// nothing.
	mem   memory
	stack [sandbox.MaxHostParams]uint64
}

// trap records msg as the reason the run traps and returns the trap that
// unwinds the guest.
func (r *run) trap(msg string) unsafe.Pointer {
	if r.trapMsg == "" {
		r.trapMsg = msg
	}
	return newTrap(msg)
}

// Run implements sandbox.Module. See the package documentation for what the
// instance is given. For a reactor, the entry function must take no
// parameters; if it returns a single i32, a non-zero value is reported as an
// *ExitError with that code.
func (m *Module) Run(ctx context.Context, cfg sandbox.RunConfig) (err error) {
	c := m.c
	e := c.eng
	if m.closed.Load() {
		return errors.New("sandbox/wasmtime: module closed")
	}
	if err := ctx.Err(); err != nil {
		return ctxError(err)
	}

	entryName := cfg.Entry
	var entry funcSig
	if c.kind == sandbox.Reactor {
		if entryName == "" {
			entryName = sandbox.DefaultEntry
		}
		var ok bool
		if entry, ok = c.exports[entryName]; !ok {
			return wasmbin.EntryError(c.allExports, "sandbox/wasmtime", c.digest, entryName)
		}
		if entry.params != "" {
			return fmt.Errorf("sandbox/wasmtime: entry %q takes parameters", entryName)
		}
	}

	f := c.start.Load()
	limit := cfg.MemoryLimit
	if limit == 0 || limit > defaultMemoryLimit {
		limit = defaultMemoryLimit
	}
	if f.memMin > limit {
		return fmt.Errorf("sandbox/wasmtime: initial memory of %d bytes exceeds the limit of %d: %w",
			f.memMin, limit, sandbox.ErrMemoryLimit)
	}

	// The stack the host calls need, while it is cheap to grow (stack.go).
	growStack()

	// Hold the engine and the compiled module open for the whole run.
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return errors.New("sandbox/wasmtime: engine closed")
	}
	e.running.Add(1)
	c.refs++
	e.mu.Unlock()
	defer e.running.Done()
	defer c.release()

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.Timeout > 0 {
		runCtx, cancel = context.WithTimeout(runCtx, cfg.Timeout)
		defer cancel()
	}
	// Engine.Close stops the run.
	stopOnClose := context.AfterFunc(e.closeCtx, cancel)
	defer stopOnClose()

	name := cfg.Name
	if name == "" {
		name = "guest"
	}
	r := &run{ctx: runCtx, name: name, stdout: cfg.Stdout, stderr: cfg.Stderr, start: e.start}
	if r.stdout == nil {
		r.stdout = io.Discard
	}
	if r.stderr == nil {
		r.stderr = io.Discard
	}
	// A task whose _initialize may become the module's snapshot runs it
	// watched (snapshot.go), with the argv every task of a snapshot sees.
	var watch *initWatch
	if f.hasInit && c.taker.open() {
		watch = &initWatch{}
		r.stdout, r.stderr = watch.Writer(r.stdout), watch.Writer(r.stderr)
		r.name = snapshotArgv
	} else if f.snapshot {
		r.name = snapshotArgv
	}

	// A slot of the pool, given back once the store (and its instance's
	// memory, reset by wasmtime for the next instance) is gone.
	if e.pool != nil {
		if err := e.pool.acquire(); err != nil {
			return err
		}
		defer e.pool.release()
	}
	store := wt.NewStore(e.wt)
	defer store.Close()
	unregister := register(store, r)
	defer unregister()
	// One instance, its own tables and one memory; no table past its
	// limit, no memory past the run's.
	store.Limiter(int64(limit), int64(min(c.tableLimit, math.MaxInt32)), 1, int64(max(c.tables, 1)), 1)

	switch e.opt.preempt {
	case preemptEpoch:
		stop := watchEpoch(store, e.wt, runCtx)
		defer stop()
	case preemptFuel:
		if err := store.SetFuel(math.MaxUint64); err != nil {
			return fmt.Errorf("sandbox/wasmtime: fuel: %w", err)
		}
	}

	inst, err := e.linker.Instantiate(store, f.mod)
	if err != nil {
		return r.outcome(err, store, nil, limit)
	}
	r.lookUpMemory(store, inst)
	call := func(fn string) (any, error) {
		f := inst.GetFunc(store, fn)
		if f == nil {
			return nil, fmt.Errorf("sandbox/wasmtime: no function %q", fn)
		}
		return f.Call(store)
	}
	if c.kind == sandbox.Command {
		_, err = call("_start")
		return r.outcome(err, store, inst, limit)
	}
	if f.hasInit {
		r.watch = watch
		_, err = call("_initialize")
		r.watch = nil
		if err != nil || r.exited {
			return r.outcome(err, store, inst, limit)
		}
		if watch != nil {
			c.taker.take(store, inst, watch)
		}
	}
	res, err := call(entryName)
	if err != nil {
		return r.outcome(err, store, inst, limit)
	}
	if entry.results == "i" {
		if code, _ := res.(int32); code != 0 {
			return &sandbox.ExitError{Code: uint32(code)}
		}
	}
	return nil
}

// outcome maps the error of an instantiation or a call to what Run reports.
func (r *run) outcome(err error, store *wt.Store, inst *wt.Instance, limit uint64) error {
	if err == nil && !r.exited {
		return nil
	}
	if r.exited && r.exitCode == 0 {
		return nil
	}
	// As in sandbox/wazero, only a limit below the default is reported:
	// without one, a growth past 4 GiB is refused like any other failure.
	var memErr error
	if limit < defaultMemoryLimit && refusedGrowth(store, inst, limit) {
		memErr = sandbox.ErrMemoryLimit
	}
	if r.exited {
		// proc_exit is the guest's own word: a guest can not fake a
		// timeout with it, because only the context says so, nor the
		// memory limit, because only a refused growth does.
		return &sandbox.ExitError{Code: r.exitCode, Err: memErr}
	}
	if ctxErr := r.ctx.Err(); ctxErr != nil && memErr == nil {
		return ctxError(ctxErr)
	}
	msg := r.trapMsg
	if msg == "" {
		msg = err.Error()
		var trap *wt.Trap
		if errors.As(err, &trap) {
			if code := trap.Code(); code != nil && *code == wt.StackOverflow && !strings.Contains(msg, "stack overflow") {
				msg = "stack overflow: " + msg
			}
		}
	}
	if len(msg) > maxTrapLen {
		msg = msg[:maxTrapLen] + "..."
	}
	return &sandbox.ExitError{Trap: msg, Err: memErr}
}

// refusedGrowth reports whether a memory.grow of the run was refused
// because it would have taken the memory past limit.
//
// wasmtime-go's store limiter refuses such a growth (memory.grow returns
// -1) but does not say that it did, so the module was rewritten before
// compiling (wasmbin.TrackGrowth): every memory.grow goes through a
// function that, when the growth fails, records the size it asked for, in
// pages, in the global exported as wasmbin.GrowthExport (the largest such
// size of the run). A growth refused past the limit is reported however far
// below the limit the memory was, and a growth refused for another reason
// (past the module's own maximum) or a guest merely saying "out of memory"
// is not. A module TrackGrowth left alone (a 64-bit memory, say) has no
// such global and is never reported as out of memory; nor is a failure of
// instantiation, which leaves no instance to read.
func refusedGrowth(store *wt.Store, inst *wt.Instance, limit uint64) bool {
	if inst == nil {
		return false
	}
	ext := inst.GetExport(store, wasmbin.GrowthExport)
	if ext == nil || ext.Global() == nil {
		return false
	}
	pages := uint64(ext.Global().Get(store).I64()) // at most 2^32 - 1 + 2^16
	return pages != 0 && pages<<16 > limit
}

func ctxError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return sandbox.ErrTimeout
	}
	return sandbox.ErrCanceled
}
