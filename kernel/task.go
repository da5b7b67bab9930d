package kernel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox"
)

var now = time.Now

// TaskState is where a task is in its life.
type TaskState string

const (
	TaskRunning     TaskState = "running"
	TaskDone        TaskState = "done"          // the guest finished normally
	TaskFailed      TaskState = "failed"        // non-zero exit, trap or kernel error
	TaskTimedOut    TaskState = "timed_out"     // stopped at its wall-clock deadline
	TaskOutOfMemory TaskState = "out_of_memory" // died after its memory limit refused growth
	TaskKilled      TaskState = "killed"        // stopped by its parent or the host
)

// Limits bound a task. Zero fields take the defaults.
type Limits struct {
	Memory     uint64        // bytes of linear memory; 0 = 256 MiB
	Timeout    time.Duration // wall clock; 0 = 5 minutes
	MaxHandles int           // capability table size; 0 = DefaultMaxHandles
	MaxOutput  int           // bytes kept of stdout and of stderr; 0 = DefaultMaxOutput
	// MaxBlobBytes bounds the bytes of the blobs the task holds at once
	// (its input, call results, blobs it made); 0 = DefaultMaxBlobBytes.
	// A call whose result would pass it fails with ELIMIT.
	MaxBlobBytes int64
	// MaxStoredOutput bounds what the run store keeps of each of the
	// task's result, stdout and stderr (manifest: limits.stored_output); 0 =
	// DefaultMaxStoredOutput. The kernel only carries it: the host cuts
	// what it records, and the record says what was cut.
	MaxStoredOutput int64

	// The static limits on the task's module, checked on its bytes
	// before it is compiled (sandbox.StaticLimits: the most functions,
	// locals of one function, nesting of blocks, targets of one
	// br_table, bytes of one function body); 0 = the engine's default
	// (sandbox.DefaultStaticLimits). CompileLimits says how.
	Functions, Locals, Nesting, BrTableTargets, FunctionSize int
	// CompileMemory bounds the memory compiling the task's module may
	// use; 0 = sandbox.DefaultCompileMemory.
	CompileMemory uint64
}

// CompileLimits is the sandbox.CompileConfig a task of limits l compiles
// its module under: l's static limits, its timeout (DefaultTimeout when
// zero) and its compile memory (zero fields are the engine's defaults).
func (l Limits) CompileLimits() sandbox.CompileConfig {
	t := l.Timeout
	if t == 0 {
		t = DefaultTimeout
	}
	return sandbox.CompileConfig{
		Limits: sandbox.StaticLimits{Functions: l.Functions, Locals: l.Locals, Nesting: l.Nesting,
			BrTableTargets: l.BrTableTargets, BodySize: l.FunctionSize},
		Timeout:     t,
		MemoryLimit: l.CompileMemory,
	}
}

// Default limits.
const (
	DefaultMemory       = 256 << 20
	DefaultTimeout      = 5 * time.Minute
	DefaultMaxBlobBytes = 256 << 20
	// DefaultMaxStoredOutput is what the run store keeps of each task's
	// result and of each of its output streams.
	DefaultMaxStoredOutput = 1 << 20
)

func (l Limits) withDefaults() Limits {
	if l.Memory == 0 {
		l.Memory = DefaultMemory
	}
	if l.Timeout == 0 {
		l.Timeout = DefaultTimeout
	}
	if l.MaxHandles == 0 {
		l.MaxHandles = DefaultMaxHandles
	}
	if l.MaxOutput == 0 {
		l.MaxOutput = DefaultMaxOutput
	}
	if l.MaxBlobBytes == 0 {
		l.MaxBlobBytes = DefaultMaxBlobBytes
	}
	if l.MaxStoredOutput == 0 {
		l.MaxStoredOutput = DefaultMaxStoredOutput
	}
	return l
}

// GrantSpec is one capability granted to a root task, under a name the
// guest finds it by (cap_lookup).
type GrantSpec struct {
	Name  string
	Kind  string
	Scope kindapi.Scope
	// Audit writes every decision on this capability to the audit log
	// before its effect.
	Audit bool
	// Constraints the capability carries (see Kernel.CompileConstraints).
	Constraints Constraints
	// Rate bounds how often the capability and everything derived from it
	// may be called; zero is no bound.
	Rate Rate
	// Allowance bounds the effects the capability and everything derived
	// from it may have (max_uses) and, for a kind with amounts, what they
	// may spend together (budget, see Kernel.ParseBudget); zero is none.
	Allowance Allowance
	// ApproveMints remembers each call a person approved on the
	// capability (or on one derived from it), bound to exactly the effect
	// they were shown: the same effect again in the same task needs no
	// second question; any other still does.
	ApproveMints bool
	// ApprovePlans lets a task name effects on the capability (or on one
	// derived from it) in a plan (plan_submit): a person approves the
	// plan once, and each of its effects is then allowed once without a
	// question of its own (plan.go). It replaces only the yes: every
	// other check of the capability still applies to each effect.
	ApprovePlans bool
}

// TaskSpec describes a task to start.
type TaskSpec struct {
	Module    sandbox.Module
	Principal string
	Name      string // program name; defaults to "task"
	Entry     string // reactor entry; defaults to sandbox.DefaultEntry
	Limits    Limits
	Grants    []GrantSpec
	Input     []byte
	// InputLabel labels the input blob.
	InputLabel kindapi.Label
	// Clearance bounds what the task may ever hold; nil means unbounded.
	Clearance *kindapi.Label
	// RefuseTaintedResult refuses a result carrying any integrity taint
	// (a manifest's result { accepts_untrusted = false }): SetResult of
	// such a blob is EFLOW, audited.
	RefuseTaintedResult bool
	// RefusedResultTaints refuses a result carrying a taint one of them
	// matches (a manifest's result { refuses_taints = [...] }): SetResult
	// of such a blob is EFLOW naming the taint, audited. With
	// RefuseTaintedResult every taint is refused anyway.
	RefusedResultTaints kindapi.TaintPatterns
}

// Task is one WebAssembly instance with its own capability table.
type Task struct {
	k         *Kernel
	id        string
	parent    *Task
	principal string
	module    string
	limits    Limits
	logger    hclog.Logger
	table     *CapTable
	input     *kindapi.Blob
	stdout    *outputWriter
	stderr    *outputWriter
	cancel    context.CancelFunc // set at launch; protected by mu
	done      chan struct{}
	info      kindapi.TaskInfo
	depth     int       // 0 for a root task, parent's + 1 for a child
	deadline  time.Time // when the task's timeout ends; set at launch
	// resolveBlob is t.table.GetBlob, bound once so calls do not allocate
	// a method value each time.
	resolveBlob func(abi.Handle) (*kindapi.Blob, error)
	// labelOf is t.Label, bound once for the same reason.
	labelOf func() kindapi.Label
	// reads is what given and seen see (seen.go).
	reads reads
	// raiseOf is t.raise, bound once for the same reason: what a call's
	// pattern parts revealed (kindapi.Call.SetReveal).
	raiseOf func(kindapi.Label)

	mu      sync.Mutex
	names   map[string]*Cap // root grants by name; protected by mu
	label   kindapi.Label   // join of everything read; protected by mu
	result  *kindapi.Blob   // protected by mu
	lastErr string          // reason of the last failed call; protected by mu
	denials int             // protected by mu
	// clearance bounds the label; nil: unbounded. Immutable after start.
	clearance *kindapi.Label
	// resultRefuses is what the task's result refuses: TaskSpec's
	// RefuseTaintedResult and RefusedResultTaints (resultflow.go).
	// Immutable.
	resultRefuses kindapi.Sink
	// refusedResult is why SetResult refused a result (a tainted one);
	// protected by mu.
	refusedResult string
	children      int             // tasks spawned by this one; protected by mu
	kids          []*Task         // the children launched; protected by mu
	runCtx        context.Context // the context the task runs in, once launched; protected by mu
	lastDenial    abi.Errno       // the errno of the last denied call; protected by mu
	state         TaskState       // protected by mu
	err           error           // protected by mu

	// plans are the plans a person approved for this task (plan.go).
	plans plans
}

// ID is unique within the kernel, e.g. "t1".
func (t *Task) ID() string { return t.id }

// Principal is the person the task acts for.
func (t *Task) Principal() string { return t.principal }

// Module is the digest of the task's module.
func (t *Task) Module() string { return t.module }

// Logger is the task's logger.
func (t *Task) Logger() hclog.Logger { return t.logger }

// Label is the join of everything the task has read so far.
func (t *Task) Label() kindapi.Label {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.label
}

// State is the task's current state.
func (t *Task) State() TaskState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state
}

// Stdout and Stderr return what was kept of the guest's output.
func (t *Task) Stdout() Output { return t.stdout.output() }
func (t *Task) Stderr() Output { return t.stderr.output() }

// Denials counts the task's refused calls.
func (t *Task) Denials() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.denials
}

// LastError is the reason of the task's last failed call, if any.
func (t *Task) LastError() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastErr
}

// Start creates the task's table with its grants and runs it in the
// background. Wait for it with Wait.
func (k *Kernel) Start(ctx context.Context, spec TaskSpec) (*Task, error) {
	t, err := k.newTask(spec, nil)
	if err != nil {
		return nil, err
	}
	if err := k.grant(t, spec.Grants); err != nil {
		return nil, err
	}
	if err := k.admit(); err != nil {
		return nil, err
	}
	t.launch(ctx, spec)
	return t, nil
}

// grant inserts a new task's root grants into its table.
func (k *Kernel) grant(t *Task, grants []GrantSpec) error {
	if len(grants) > t.limits.MaxHandles {
		return fmt.Errorf("kernel: %d grants exceed the handle limit %d", len(grants), t.limits.MaxHandles)
	}
	for _, g := range grants {
		kind, ok := k.kinds[g.Kind]
		if !ok {
			return fmt.Errorf("kernel: grant %q: unknown kind %q", g.Name, g.Kind)
		}
		if g.Scope == nil {
			return fmt.Errorf("kernel: grant %q has no scope", g.Name)
		}
		if _, dup := t.names[g.Name]; dup {
			return fmt.Errorf("kernel: grant %q named twice", g.Name)
		}
		if g.Rate.N < 0 || !g.Rate.IsZero() && g.Rate.Per <= 0 {
			return fmt.Errorf("kernel: grant %q: invalid rate %d per %s", g.Name, g.Rate.N, g.Rate.Per)
		}
		if g.Allowance.MaxUses < 0 || g.Allowance.Budget < 0 {
			return fmt.Errorf("kernel: grant %q: negative max_uses or budget", g.Name)
		}
		if g.Allowance.Budget > 0 && kind.info.Amounts == nil {
			return fmt.Errorf("kernel: grant %q: a %s capability has no amounts to budget", g.Name, g.Kind)
		}
		c := &Cap{kind: kind.kind, reg: kind, scope: g.Scope, name: g.Name, holder: t,
			audit: g.Audit || kind.lowers, cons: g.Constraints, allow: newAllowance(g.Allowance), approveMints: g.ApproveMints,
			approvePlans: g.ApprovePlans}
		if !g.Rate.IsZero() {
			c.rate = newBucket(g.Rate, time.Now())
		}
		if _, err := k.link(c); err != nil {
			return err
		}
		if _, err := t.table.InsertCap(c); err != nil {
			return err
		}
		t.names[g.Name] = c
	}
	return nil
}

// newTask makes a task that is not yet running: its identity, limits,
// table (empty), logger, output capture and input.
func (k *Kernel) newTask(spec TaskSpec, parent *Task) (*Task, error) {
	if spec.Module == nil {
		return nil, fmt.Errorf("kernel: task has no module")
	}
	if len(spec.Input) > abi.MaxBlobLen {
		return nil, fmt.Errorf("kernel: input of %d bytes exceeds %d", len(spec.Input), abi.MaxBlobLen)
	}
	if spec.Entry != "" && spec.Module.Kind() != sandbox.Reactor {
		return nil, fmt.Errorf("kernel: entry %q given but the module is a %s (only reactors have entries)", spec.Entry, spec.Module.Kind())
	}
	limits := spec.Limits.withDefaults()
	k.mu.Lock()
	k.nextTask++
	id := fmt.Sprintf("t%d", k.nextTask)
	k.mu.Unlock()
	t := &Task{
		k:         k,
		id:        id,
		parent:    parent,
		principal: spec.Principal,
		module:    spec.Module.Digest(),
		limits:    limits,
		table:     NewCapTable(limits.MaxHandles),
		names:     make(map[string]*Cap),
		state:     TaskRunning,
		done:      make(chan struct{}),
	}
	if parent != nil {
		t.depth = parent.depth + 1
	}
	t.info = kindapi.TaskInfo{ID: id, Principal: spec.Principal, Module: t.module}
	t.table.SetBlobLimit(limits.MaxBlobBytes)
	t.resolveBlob = t.table.GetBlob
	t.labelOf = t.Label
	t.raiseOf = t.raise
	t.logger = k.logger.Named("task").With("task", id, "principal", spec.Principal, "module", logDigest(t.module))
	t.stdout = newOutputWriter("stdout", t.logger, limits.MaxOutput)
	t.stderr = newOutputWriter("stderr", t.logger, limits.MaxOutput)
	if spec.Clearance != nil {
		c := *spec.Clearance
		t.clearance = &c
	}
	t.resultRefuses = kindapi.Sink{RefusesTainted: spec.RefuseTaintedResult, RefusedTaints: spec.RefusedResultTaints}
	if t.refusesResultTaints() {
		refused := func() bool { _, r := t.resultRefuses.RefusedTaint(t.Label()); return r }
		t.stdout.withhold, t.stderr.withhold = refused, refused
	}
	if spec.Input != nil {
		if int64(len(spec.Input)) > limits.MaxBlobBytes {
			return nil, fmt.Errorf("kernel: input of %d bytes exceeds the task's blob limit of %d", len(spec.Input), limits.MaxBlobBytes)
		}
		t.input = kindapi.NewBlob(spec.Input, spec.InputLabel)
		if err := t.mayHold(t.input.Label()); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// launch registers the task and runs it in the background.
func (t *Task) launch(ctx context.Context, spec TaskSpec) {
	k := t.k
	k.mu.Lock()
	k.tasks = append(k.tasks, t)
	k.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	ctx = withTask(ctx, t)
	t.mu.Lock()
	t.runCtx, t.cancel = ctx, cancel
	t.mu.Unlock()
	name := spec.Name
	if name == "" {
		name = "task"
	}
	cfg := sandbox.RunConfig{
		Name:        name,
		Entry:       spec.Entry,
		MemoryLimit: t.limits.Memory,
		Timeout:     t.limits.Timeout,
		Stdout:      t.stdout,
		Stderr:      t.stderr,
	}
	t.deadline = now().Add(t.limits.Timeout)
	args := []any{"caps", t.table.Len(), "memory", t.limits.Memory, "timeout", t.limits.Timeout}
	if t.parent != nil {
		args = append(args, "parent", t.parent.id, "depth", t.depth)
	}
	t.logger.Info("task started", args...)
	if k.observer != nil {
		k.observer.TaskStarted(t)
	}
	go t.run(ctx, spec.Module, cfg)
}

// admit counts a task about to run against the kernel's limit on live
// tasks: however spawning is nested, no more than MaxTasks run at once.
func (k *Kernel) admit() error {
	if n := k.live.Add(1); n > int64(k.maxTasks) {
		k.live.Add(-1)
		return kindapi.Errorf(abi.ELIMIT, "%d tasks are running (the kernel's limit is %d)", n-1, k.maxTasks)
	}
	return nil
}

// Run starts a task and waits for it.
func (k *Kernel) Run(ctx context.Context, spec TaskSpec) (*Task, error) {
	t, err := k.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	return t, t.Wait(ctx)
}

func (t *Task) run(ctx context.Context, mod sandbox.Module, cfg sandbox.RunConfig) {
	start := now()
	err := runGuarded(ctx, mod, cfg)
	t.expirePlans(ctx)
	t.stdout.close()
	t.stderr.close()
	state := TaskDone
	switch {
	case err == nil:
	case errors.Is(err, sandbox.ErrTimeout):
		state = TaskTimedOut
		err = fmt.Errorf("task %s stopped at its %v deadline: %w", t.id, cfg.Timeout, err)
	case errors.Is(err, sandbox.ErrMemoryLimit):
		state = TaskOutOfMemory
		err = fmt.Errorf("task %s ran out of its %d-byte memory limit: %w", t.id, cfg.MemoryLimit, err)
	case errors.Is(err, sandbox.ErrCanceled):
		state = TaskKilled
		err = fmt.Errorf("task %s was killed: %w", t.id, err)
	default:
		state = TaskFailed
		err = fmt.Errorf("task %s failed: %w", t.id, err)
	}
	var ee *sandbox.ExitError
	said := ""
	if state == TaskFailed && errors.As(err, &ee) {
		// A guest that gives up says why on stderr, last (the agent
		// loop's "stopped at step 3: the token budget ..."): that is the
		// reason runs, logs and results show.
		if said = t.stderr.lastLine(); said != "" && !t.stderr.isWithheld() {
			err = fmt.Errorf("%w: it said: %s", err, kindapi.Printable(said))
		}
	}
	stdoutWithheld := t.stdout.isWithheld() // (before mu: a write takes the stream's lock, then mu)
	t.mu.Lock()
	if state == TaskFailed && t.lastErr != "" && !strings.Contains(said, t.lastErr) {
		err = fmt.Errorf("%w (last denied call: %s)", err, t.lastErr)
	}
	if state == TaskDone && t.result == nil {
		// Its answer was refused (result { accepts_untrusted = false }
		// or refuses_taints): a run that has no answer to show did not
		// succeed.
		switch {
		case t.refusedResult != "":
			state, err = TaskFailed, fmt.Errorf("task %s's answer was withheld: %s", t.id, t.refusedResult)
		case stdoutWithheld:
			state, err = TaskFailed, fmt.Errorf("task %s's answer was withheld: it wrote its stdout after it read data labelled %s, "+
				"and %s", t.id, t.label, t.resultRefusesText(t.label))
		}
	}
	t.state, t.err = state, err
	t.mu.Unlock()
	if err != nil {
		t.logger.Error("task ended", "state", state, "elapsed", now().Sub(start), "error", err)
	} else {
		t.logger.Info("task ended", "state", state, "elapsed", now().Sub(start))
	}
	t.cancel()
	// Its children were canceled with it: the task has ended only once
	// they have, so nothing reads a child of an ended task as running.
	t.mu.Lock()
	kids := t.kids
	t.mu.Unlock()
	for _, c := range kids {
		<-c.done
	}
	t.k.live.Add(-1)
	close(t.done)
	if o := t.k.observer; o != nil {
		o.TaskEnded(t)
	}
}

// runGuarded runs the module, turning an engine panic into an error: the
// kernel never goes down because of what a guest did.
func runGuarded(ctx context.Context, mod sandbox.Module, cfg sandbox.RunConfig) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &kindapi.Error{Errno: abi.EINTERNAL, Msg: fmt.Sprintf("engine panic: %v", r)}
		}
	}()
	return mod.Run(ctx, cfg)
}

// Wait blocks until the task ends or ctx is done, and returns the task's
// error: nil when it finished normally.
func (t *Task) Wait(ctx context.Context) error {
	select {
	case <-t.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// Done is closed when the task has ended.
func (t *Task) Done() <-chan struct{} { return t.done }

// Kill stops the task; its Wait returns an error and its state is killed.
func (t *Task) Kill() {
	t.mu.Lock()
	cancel := t.cancel
	t.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// Result returns the bytes of the blob the task set as its result, and
// whether it set one.
func (t *Task) Result() ([]byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.result == nil {
		return nil, false
	}
	return t.result.Bytes(), true
}

// Limits are the task's limits, the defaults filled in.
func (t *Task) Limits() Limits { return t.limits }

// ResultBlob returns the task's result blob, nil if none (read it without
// a copy with its Reader or ReadAt).
func (t *Task) ResultBlob() *kindapi.Blob {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.result
}

// Caps lists the capabilities in the task's table.
func (t *Task) Caps() []*Cap { return t.table.caps() }

// CapByName returns the root grant with the given name.
func (t *Task) CapByName(name string) (*Cap, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.names[name]
	return c, ok
}

type taskKey struct{}

func withTask(ctx context.Context, t *Task) context.Context {
	return context.WithValue(ctx, taskKey{}, t)
}

func taskFrom(ctx context.Context) *Task {
	t, _ := ctx.Value(taskKey{}).(*Task)
	return t
}

// LastDenial is the errno of the task's last denied call (ESUCCESS when
// none was) and what LastError says of it: why a tool that gave up after
// a refusal failed, for a host to tell its client.
func (t *Task) LastDenial() (abi.Errno, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastDenial, t.lastErr
}

// logDigest is how the log names a module: its digest cut to 12 hex
// digits (as mandate graph prints it), so that a line stays readable; the
// run's record, the audit log and receipts keep the whole digest.
func logDigest(d string) string {
	if len(d) > len("sha256:")+12 && strings.HasPrefix(d, "sha256:") {
		return d[:len("sha256:")+12]
	}
	return d
}
