package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/constraint"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/manifest"
	"github.com/mandatevm/mandate/runstore"
	"github.com/mandatevm/mandate/sandbox"
)

// Options configure a Host.
type Options struct {
	// StateDir holds the audit log (audit.db, audit.key), the run store
	// (runs.db) and the data store (data.db); created 0700 when missing.
	// Required.
	StateDir string
	// DataStore is the data kind's store: a SQLite file path, or a
	// postgres:// URL for a database a fleet of nodes shares; default
	// $MANDATE_DATA_STORE, else STATE_DIR/data.db (see DataStore).
	DataStore string
	// CacheDir holds built guests and compiled modules; default
	// $MANDATE_CACHE_DIR, else the user cache directory + /mandate.
	CacheDir string
	// Engine runs the guests: "wazero" (the default) or, in a build with
	// the tag wasmtime, "wasmtime".
	Engine string
	// Logger is the root logger of every run; default: none.
	Logger hclog.Logger
	// Approver answers the uses that need a person's yes, for runs that
	// set none; default kernel.DenyAll.
	Approver kernel.Approver
}

// Host runs tasks from manifests and records them: every decision in the
// audit log before its effect, every run in the run store. It is safe for
// concurrent use; runs started on it run at once, each with its own
// kernel, on one engine and its compiled modules, which the host keeps
// for all its runs (see the package documentation).
type Host struct {
	opts  Options
	log   *audit.Log
	store *runstore.Store
	subs  fanout
	runs  sync.WaitGroup

	mu     sync.Mutex
	closed bool // protected by mu

	engMu sync.Mutex
	mods  *moduleCache // the runs' engine and compiled modules, made by the first run; protected by engMu
}

// OpenError is a state directory that cannot hold runs: its audit log or
// run store is damaged, read-only or full. Nothing was run or recorded.
type OpenError struct {
	// Log is true when the audit log is what failed (else the run store);
	// Head, when it opened but its head cannot be trusted or written.
	Log, Head bool
	Err       error
}

func (e *OpenError) Error() string { return e.Err.Error() }
func (e *OpenError) Unwrap() error { return e.Err }

// Open opens the state directory for running tasks. No log, no run: the
// audit log must be sound (its latest signed checkpoint matching the tree,
// the entries since intact) and writable, and the run store able to
// record, before anything runs; otherwise Open fails with an *OpenError.
func Open(ctx context.Context, o Options) (*Host, error) {
	if o.StateDir == "" {
		return nil, errors.New("host: no state directory")
	}
	if o.Engine == "" {
		o.Engine = DefaultEngine
	}
	if !HasEngine(o.Engine) {
		return nil, errors.New(UnknownEngine(o.Engine))
	}
	if o.CacheDir == "" {
		d, err := DefaultCacheDir()
		if err != nil {
			return nil, err
		}
		o.CacheDir = d
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Approver == nil {
		o.Approver = kernel.DenyAll
	}
	if o.DataStore == "" {
		o.DataStore = DataStore(o.StateDir)
	}
	if err := os.MkdirAll(o.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	alog, err := audit.Open(filepath.Join(o.StateDir, "audit.db"))
	if err != nil {
		return nil, &OpenError{Log: true, Err: err}
	}
	if err := alog.CheckHead(ctx); err != nil {
		alog.Close()
		return nil, &OpenError{Log: true, Head: true, Err: err}
	}
	store, err := runstore.Open(o.StateDir)
	if err != nil {
		alog.Close()
		return nil, &OpenError{Err: err}
	}
	// A store that cannot record a run is found now, before a task runs,
	// not at its end.
	if err := store.Check(ctx); err != nil {
		store.Close()
		alog.Close()
		return nil, &OpenError{Err: err}
	}
	for _, err := range store.ImportErrors {
		o.Logger.Warn("run store", "error", err)
	}
	return &Host{opts: o, log: alog, store: store}, nil
}

// DefaultCacheDir is $MANDATE_CACHE_DIR, else the user cache directory +
// /mandate.
func DefaultCacheDir() (string, error) {
	if d := os.Getenv("MANDATE_CACHE_DIR"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: set MANDATE_CACHE_DIR (%v)", err)
	}
	return filepath.Join(d, "mandate"), nil
}

// Log is the host's audit log (to sign receipts and checkpoints).
func (h *Host) Log() *audit.Log { return h.log }

// Store is the host's run store.
func (h *Host) Store() *runstore.Store { return h.store }

// Options returns the options the host was opened with, defaults filled
// in.
func (h *Host) Options() Options { return h.opts }

// Subscribe streams the events of every run on the host from now on into a
// channel of the given buffer. Events are never waited for: when the
// channel is full they are dropped, and the next one delivered counts them
// (Event.Dropped). Call stop to end the subscription; the channel is
// closed then, and when the host closes.
func (h *Host) Subscribe(buffer int) (events <-chan Event, stop func()) {
	return h.subs.add(buffer)
}

// Close waits for the runs in progress to be recorded, then closes the
// engine, its compiled modules and the stores. Kill runs first to end
// them sooner.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.mu.Unlock()
	h.runs.Wait()
	h.subs.close()
	return errors.Join(h.closeEngine(), h.store.Close(), h.log.Close())
}

// RunSpec is a run to start: a manifest's task, with its input.
type RunSpec struct {
	// Manifest is the task: from manifest.Load, or manifest.Parse of a
	// text built in code. The host does not change it; one manifest can
	// serve many runs.
	Manifest *manifest.Manifest
	// Input is the task's input blob.
	Input []byte
	// Approver answers this run's approvals; default Options.Approver.
	Approver kernel.Approver
	// Logger is this run's logger; default Options.Logger.
	Logger hclog.Logger
	// Receipt, when set, is the file the run's signed receipt is written
	// to as it ends (see Outcome.ReceiptErr).
	Receipt string
	// ReceiptFormat is the receipt's form: ReceiptNote (the default) or
	// ReceiptDSSE.
	ReceiptFormat string
	// Begun, when set, is called with the run's id once the run is in the
	// run store, before its task starts.
	Begun func(id string)
	// Module, when set, is the root task's module: these bytes are run
	// instead of the module the manifest names (which is not read or
	// built); the manifest's digest pin still applies. A fleet node runs a
	// submitted module this way.
	Module []byte
	// Seed, when set, is the stable identity of a run that may be run
	// again (a fleet's submission id, the same for every attempt): grants
	// derive from it what must not change between attempts, such as pay's
	// idempotency keys (kindapi.GrantContext.Seed). With a manifest's retry
	// set, the run is refused unless every capability is repeatable.
	Seed string
	// Placer runs the children a spawn capability places on other nodes
	// (kernel.Config.Placer); a fleet node sets it. Without it such a
	// spawn is ENOTSUP.
	Placer kernel.Placer
	// Fence, when set, is asked right before each of the run's effects
	// (kernel.Config.Fence): a fleet node's lease on the run.
	Fence func() error
}

// RefusedError is a run refused before its task ran: recorded in the run
// store as refused, with why.
type RefusedError struct {
	Record runstore.Record
	Err    error
}

func (e *RefusedError) Error() string { return e.Err.Error() }
func (e *RefusedError) Unwrap() error { return e.Err }

// Start starts a run of spec's task and returns at once; Wait for it.
// Canceling ctx kills the task. A run is recorded from its start: one
// refused before its task ran is recorded as refused and Start returns a
// *RefusedError; an error before the run was begun (the module cannot be
// read or built, its digest does not match the manifest's) records
// nothing.
func (h *Host) Start(ctx context.Context, spec RunSpec) (*Run, error) {
	return starting(h, func() (*Run, error) { return h.start(ctx, spec) })
}

// starting counts a run about to start among the host's runs (Close waits
// for them), unless the host is closed, and runs start; a run that does
// not start is not counted.
func starting[R any](h *Host, start func() (*R, error)) (*R, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, errors.New("host: closed")
	}
	h.runs.Add(1)
	h.mu.Unlock()
	r, err := start()
	if err != nil {
		h.runs.Done()
		return nil, err
	}
	return r, nil
}

func (h *Host) start(ctx context.Context, spec RunSpec) (*Run, error) {
	if spec.Manifest == nil {
		return nil, errors.New("host: no manifest")
	}
	// The spawn modules are resolved into the run's copy of the caps.
	m := *spec.Manifest
	m.Caps = slices.Clone(spec.Manifest.Caps)
	logger, approver := h.defaults(spec.Logger, spec.Approver)
	if m.ModuleIsDir && spec.Module == nil {
		logger.Debug("building guest", "dir", m.ModulePath)
	}
	if ctx.Value(buildNotesKey{}) == nil {
		ctx = WithBuildNotes(ctx, func(msg string) { logger.Info(msg) })
	}
	wasm, digest := spec.Module, ""
	var err error
	if wasm == nil {
		if wasm, digest, err = loadModule(ctx, &m, h.opts.CacheDir); err != nil {
			return nil, m.ModuleError(err)
		}
	} else {
		digest = sandbox.Digest(wasm)
	}
	if err := m.CheckDigest(digest); err != nil {
		return nil, err
	}
	abs, _ := filepath.Abs(m.Path)
	rs, err := newReceiptSpec(spec, m.ModulePath, digest, wasm)
	if err != nil {
		return nil, err
	}
	started := time.Now()
	r, err := h.newRun(ctx, runstore.Run{
		ID: NewRunID(started), Manifest: abs, Task: m.Name, Module: m.ModulePath, Digest: digest,
		Principal: m.Principal, Engine: h.opts.Engine, Started: started.UTC(),
	}, runConfig{logger: logger, approver: approver, placer: spec.Placer, fence: spec.Fence, receipt: rs, begun: spec.Begun})
	if err != nil {
		return nil, err
	}
	wasms, err := readSpawnModules(ctx, m.Caps, m.Dir, h.opts.CacheDir, digest)
	if err != nil {
		return r.refused(err)
	}
	// The spawn modules are the root's children's: compiled under its
	// limits, which its children inherit.
	compileLimits := m.Limits().CompileLimits()
	if err := r.addModules(ctx, wasms, compileLimits); err != nil {
		return r.refused(err)
	}
	if err := SeedTo(ctx, m.Seeds, h.opts.DataStore); err != nil {
		return r.refused(err)
	}
	grants, err := m.GrantsWith(r.k, kindapi.GrantContext{Dir: m.Dir, Seed: spec.Seed})
	if err != nil {
		return r.refused(err)
	}
	if m.Retry > 0 && spec.Seed != "" {
		if err := CheckRepeatable(r.k, grants); err != nil {
			return r.refused(err)
		}
	}
	r.mod, err = r.compile(ctx, wasm, digest, compileLimits)
	if err != nil {
		return r.refused(m.ModuleError(err))
	}
	r.modules.setRoot(r.mod)
	return r.launch(ctx, kernel.TaskSpec{
		Module:    r.mod,
		Principal: m.Principal,
		Name:      m.Name,
		Entry:     m.Entry,
		Clearance: m.Clearance,
		Limits:    m.Limits(),
		Grants:    grants,
		Input:     spec.Input,

		RefuseTaintedResult: m.RefuseTaintedResult, RefusedResultTaints: m.RefusedResultTaints,
	})
}

// defaults are a run's logger and approver, or the host's.
func (h *Host) defaults(logger hclog.Logger, approver kernel.Approver) (hclog.Logger, kernel.Approver) {
	if logger == nil {
		logger = h.opts.Logger
	}
	if approver == nil {
		approver = h.opts.Approver
	}
	return logger, approver
}

// runConfig is what a run is started with, besides what it runs.
type runConfig struct {
	logger   hclog.Logger
	approver kernel.Approver
	placer   kernel.Placer
	fence    func() error
	receipt  receiptSpec
	begun    func(id string)
}

// newRun begins a run recorded as info: in the run store from its start
// (a run whose process dies shows as "running", next to its audit
// entries), on the host's engine, with its kernel configured as every
// run's is (the kinds, the approver, the module resolver, the auditor,
// the observer, the placer). From here on a run refused before its task
// ran is recorded as refused (Run.refused). An error before the run was
// begun records nothing.
func (h *Host) newRun(ctx context.Context, info runstore.Run, c runConfig) (*Run, error) {
	r := &Run{h: h, logger: c.logger, ctx: ctx, receipt: c.receipt, info: info, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	if err := h.store.Begin(ctx, r.info); err != nil {
		return nil, err
	}
	if c.begun != nil {
		c.begun(r.info.ID)
	}
	var err error
	r.cache, err = h.engine(ctx)
	if err != nil {
		_, err = r.refused(fmt.Errorf("engine %s: %v", h.opts.Engine, err))
		return nil, err
	}
	r.modules = newModuleSet()
	r.auditor = NewAuditor(h.log.ForRun(r.info.ID), c.logger.Named("audit"))
	r.auditor.notify = r.notify
	ks, closeKinds := KindsWith(h.opts.StateDir, h.opts.DataStore)
	r.closeKinds = closeKinds
	r.k, err = kernel.New(kernel.Config{
		Engine: r.cache.eng, HostRegistered: true, Kinds: ks, Logger: c.logger,
		Approver: c.approver, Constraints: constraint.New(), Modules: r.modules,
		Auditor: r.auditor, Declassifiers: Declassifiers(), Observer: (*observer)(r),
		Placer: c.placer, Fence: c.fence,
	})
	if err != nil {
		_, err = r.refused(err)
		return nil, err
	}
	return r, nil
}

// refused records a run refused before its task ran, with why, and
// returns the *RefusedError to return: never left "running". A run whose
// module's compile ran out of its task's time or memory (the engine's
// sandbox.ErrTimeout or ErrMemoryLimit) is recorded as the task's:
// timed out or out of memory, ExitLimit; one the run's context stopped
// (Ctrl-C while its module compiled) as interrupted: killed,
// ExitInterrupted.
func (r *Run) refused(err error) (*Run, error) {
	h := r.h
	exit, state := ExitUsage, runstore.StateRefused
	switch {
	case r.ctxErr() != nil && (errors.Is(err, sandbox.ErrCanceled) || errors.Is(err, context.Canceled)):
		exit, state = ExitInterrupted, string(kernel.TaskKilled)
	case errors.Is(err, sandbox.ErrTimeout):
		exit, state = ExitLimit, string(kernel.TaskTimedOut)
	case errors.Is(err, sandbox.ErrMemoryLimit):
		exit, state = ExitLimit, string(kernel.TaskOutOfMemory)
	}
	r.info.Ended, r.info.Exit, r.info.State, r.info.Error = time.Now().UTC(), exit, state, err.Error()
	rec := runstore.Record{Version: runstore.RecordVersion, Run: r.info,
		Graph: kernel.Graph{Tasks: []kernel.GraphTask{}, Caps: []kernel.GraphCap{}}}
	if r.k != nil {
		rec.Graph = r.k.Graph()
	}
	if ferr := h.store.Finish(context.Background(), rec); ferr != nil {
		err = errors.Join(err, ferr)
	}
	r.release()
	h.subs.send(Event{Kind: EventDone, Run: r.info.ID, Time: time.Now(), State: kernel.TaskState(state), Reason: err.Error()})
	return nil, &RefusedError{Record: rec, Err: err}
}

// launch starts the run's root task and follows it until it ends.
func (r *Run) launch(ctx context.Context, spec kernel.TaskSpec) (*Run, error) {
	var err error
	r.task, err = r.k.Start(ctx, spec)
	if err != nil {
		return r.refused(err)
	}
	r.h.subs.send(Event{Kind: EventStarted, Run: r.info.ID, Time: r.info.Started, Task: r.task.ID()})
	go r.record()
	return r, nil
}

// NewRunID returns a time-sortable, unique run id, e.g.
// 20261129T153000Z-ab12cd.
func NewRunID(t time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return t.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// The exit codes recorded with a run, as "mandate run" exits.
const (
	ExitOK          = 0   // the task finished normally
	ExitTaskFailed  = 1   // the task exited non-zero, trapped, was killed or denied fatally
	ExitUsage       = 2   // refused before its task ran: manifest, build or host errors
	ExitLimit       = 3   // the task ran out of a limit: its deadline or its memory
	ExitInterrupted = 130 // the run was interrupted and its task killed
)

// CheckRepeatable returns an error naming the first grant that is not
// repeatable (kindapi.Description.Repeatable): a task holding it may not be
// run again after its node is lost.
func CheckRepeatable(k *kernel.Kernel, grants []kernel.GrantSpec) error {
	for _, g := range grants {
		kind, ok := k.Kind(g.Kind)
		if !ok {
			return fmt.Errorf("retry: capability %q: unknown kind %q", g.Name, g.Kind)
		}
		if d := kind.Describe(g.Scope); !d.Repeatable {
			why := d.NotRepeatable
			if why == "" {
				why = "its kind does not say it is"
			}
			return fmt.Errorf("retry: capability %q (%s) is not repeatable: %s; a task that may be run again holds only GETs, reads and charges keyed by the run", g.Name, g.Kind, why)
		}
	}
	return nil
}
