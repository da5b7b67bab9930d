package host

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/runstore"
	"github.com/mandatevm/mandate/sandbox"
)

// How a run's ended children are recorded, then forgotten: at most a
// second after the first one ended, or at once when this many wait.
const (
	forgetAfter = time.Second
	forgetBatch = 256
)

// Run is a run in progress. Its kernel forgets the children that ended
// once they are recorded (kernel.Forget): a run whose task spawns children
// for days does not grow.
type Run struct {
	h          *Host
	logger     hclog.Logger
	info       runstore.Run
	cache      *moduleCache    // the host's compiled modules
	held       []*cachedModule // what the run compiled or found compiled, released as it ends
	mod        sandbox.Module
	modules    *moduleSet
	auditor    *Auditor
	closeKinds func() error
	k          *kernel.Kernel
	task       *kernel.Task
	subs       fanout
	receipt    receiptSpec
	done       chan struct{}
	ended      atomic.Bool // its host ended it (Session.End): killed is its normal end
	outcome    *Outcome

	mu        sync.Mutex
	ctx       context.Context // the run's start context; protected by mu
	pending   []*kernel.Task  // children that ended, not yet recorded and forgotten
	wake      chan struct{}   // a child ended
	forgotten int
}

// ID is the run's id in the run store.
func (r *Run) ID() string { return r.info.ID }

// Info is the run as recorded at its start.
func (r *Run) Info() runstore.Run { return r.info }

// Task is the run's root task.
func (r *Run) Task() *kernel.Task { return r.task }

// Kernel is the run's kernel (to revoke a capability, or read the graph of
// what it has not forgotten).
func (r *Run) Kernel() *kernel.Kernel { return r.k }

// Kill stops the run's task and its children.
func (r *Run) Kill() { r.task.Kill() }

// Done is closed once the run has ended and is recorded.
func (r *Run) Done() <-chan struct{} { return r.done }

// Subscribe streams this run's events from now on, as Host.Subscribe
// does; the channel is closed after the run's EventDone.
func (r *Run) Subscribe(buffer int) (events <-chan Event, stop func()) {
	return r.subs.add(buffer)
}

// Wait waits for the run to end and be recorded, or for ctx.
func (r *Run) Wait(ctx context.Context) (*Outcome, error) {
	select {
	case <-r.done:
		return r.outcome, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Outcome is how a run ended, as recorded.
type Outcome struct {
	// Record is the whole record of the run, the children its kernel
	// forgot included.
	Record runstore.Record
	// Result is the root task's result, when it set one (HasResult), and
	// its label: what influenced it (the integrity taints of the sources
	// it came from, web:reviews.example) and whose data it holds.
	Result      []byte
	HasResult   bool
	ResultLabel kindapi.Label
	// State is the root task's; Err its error (nil when it finished
	// normally); Exit the exit code recorded (ExitOK...).
	State kernel.TaskState
	Err   error
	Exit  int
	// Interrupted: the context the run was started with was canceled and
	// killed the task.
	Interrupted bool
	// Checkpoint is the audit log's checkpoint signed when the run ended;
	// CheckpointErr why there is none.
	Checkpoint    []byte
	CheckpointErr error
	// ReceiptErr is why the receipt asked for (WithReceipt) was not
	// written.
	ReceiptErr error
	// RecordErr is why the run could not be recorded as it ended (the run
	// store then still shows it running).
	RecordErr error
}

// observer is a Run as the kernel's Observer.
type observer Run

func (o *observer) TaskStarted(t *kernel.Task) {
	if t.Parent() == nil {
		return // the run's EventStarted
	}
	r := (*Run)(o)
	r.notify(Event{Kind: EventSpawned, Time: time.Now(), Task: t.ID(), Parent: t.Parent().ID()})
}

func (o *observer) TaskEnded(t *kernel.Task) {
	r := (*Run)(o)
	e := Event{Kind: EventEnded, Time: time.Now(), Task: t.ID(), State: t.State()}
	if p := t.Parent(); p != nil {
		e.Parent = p.ID()
	}
	r.notify(e)
	if t.Parent() == nil {
		return // the run ends: recorded whole
	}
	r.mu.Lock()
	r.pending = append(r.pending, t)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// notify sends e to the run's and the host's subscribers.
func (r *Run) notify(e Event) {
	e.Run = r.info.ID
	r.subs.send(e)
	r.h.subs.send(e)
}

// record follows the run until its task ends: it records and forgets the
// children that ended, then records the run.
func (r *Run) record() {
	defer r.h.runs.Done()
	var timer <-chan time.Time
	for waiting := true; waiting; {
		select {
		case <-r.task.Done():
			waiting = false
		case <-r.wake:
			r.mu.Lock()
			n := len(r.pending)
			r.mu.Unlock()
			if n >= forgetBatch {
				r.forget()
				timer = nil
			} else if timer == nil {
				timer = time.After(forgetAfter)
			}
		case <-timer:
			r.forget()
			timer = nil
		}
	}
	r.finish()
}

// forget records the run so far, then forgets the children that ended.
func (r *Run) forget() {
	r.mu.Lock()
	pending := r.pending
	r.pending = nil
	r.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	if err := r.h.store.Snapshot(context.Background(), r.snapshot()); err != nil {
		// Kept in memory until a write succeeds: nothing is forgotten
		// that is not recorded.
		r.logger.Warn("recording the run so far failed; its ended tasks stay in memory", "run", r.info.ID, "error", err)
		r.mu.Lock()
		r.pending = append(pending, r.pending...)
		r.mu.Unlock()
		return
	}
	forgot := 0
	for _, t := range pending {
		if err := r.k.Forget(t); err != nil {
			r.logger.Warn("forget", "task", t.ID(), "error", err)
			continue
		}
		forgot++
	}
	r.forgotten += forgot
	r.logger.Debug("ended tasks recorded and forgotten", "run", r.info.ID, "tasks", forgot, "kept", len(r.k.Tasks()))
}

// snapshot is the record of what the kernel has not forgotten.
func (r *Run) snapshot() runstore.Record {
	rec := runstore.Record{Version: runstore.RecordVersion, Run: r.info, Graph: r.k.Graph(), Outputs: TaskOutputs(r.k)}
	rec.Denials, rec.Flows, rec.DenialsDropped, rec.FlowsDropped = r.auditor.Kept()
	rec.Approvals = r.auditor.Approvals()
	rec.Effects, rec.EffectsDropped = r.auditor.Effects()
	return rec
}

// Effects are the effects the calls of task and of its descendants had
// so far, as the audit log records them (at most runstore.MaxEffects for
// the whole run): what a tool call did, beside its result.
func (r *Run) Effects(task string) []runstore.Effect {
	all, _ := r.auditor.Effects()
	if len(all) == 0 {
		return nil // most calls: no graph to walk
	}
	tree := map[string]bool{task: true}
	tasks := r.k.Graph().Tasks
	for grew := true; grew; {
		grew = false
		for _, t := range tasks {
			if !tree[t.ID] && tree[t.Parent] {
				tree[t.ID], grew = true, true
			}
		}
	}
	var out []runstore.Effect
	for _, e := range all {
		if tree[e.Task] {
			out = append(out, e)
		}
	}
	return out
}

// finish records the run as it ended and releases what it held.
func (r *Run) finish() {
	taskErr := r.task.Wait(context.Background())
	ended := time.Now()
	state := r.task.State()
	if r.ended.Load() && state == kernel.TaskKilled {
		state, taskErr = kernel.TaskDone, nil // a session its host ended
	}
	o := &Outcome{State: state, Err: taskErr}
	o.Result, o.HasResult = r.task.Result()
	if b := r.task.ResultBlob(); b != nil {
		o.ResultLabel = b.Label()
	}
	o.Interrupted = o.State == kernel.TaskKilled && r.ctxErr() != nil
	o.Exit = exitFor(o.State, taskErr, o.Interrupted)
	// Sign the log's head: a later "mandate audit verify" detects any edit
	// of this run's entries.
	o.Checkpoint, o.CheckpointErr = r.h.log.Checkpoint()
	r.info.Ended, r.info.Exit, r.info.State = ended.UTC(), o.Exit, string(o.State)
	if taskErr != nil {
		r.info.Error = taskErr.Error()
	}
	rec := r.snapshot()
	rec.Run = r.info
	full := rec
	if r.forgotten > 0 {
		// The receipt covers the children forgotten too: what the store
		// kept of them, with what the kernel still holds.
		if err := r.h.store.Snapshot(context.Background(), rec); err == nil {
			if got, err := r.h.store.Get(context.Background(), r.info.ID); err == nil {
				full.Graph = got.Graph
				full.Outputs = got.Outputs
			}
		}
	}
	if r.receipt.path != "" {
		rc := BuildReceipt(&full, r.task.ID(), o.Checkpoint)
		signed, err := r.receipt.sign(r.h.log, rc)
		if err == nil {
			err = WriteFileAtomic(r.receipt.path, signed, 0o644)
		}
		if err != nil {
			o.ReceiptErr = err
			if o.Exit == ExitOK {
				o.Exit = ExitUsage
			}
			rec.Run.Exit, full.Run.Exit, r.info.Exit = o.Exit, o.Exit, o.Exit
		} else {
			r.logger.Info("receipt written", "path", r.receipt.path, "format", r.receipt.format)
		}
	}
	// Recorded even when the run was interrupted.
	if err := r.h.store.Finish(context.Background(), rec); err != nil {
		o.RecordErr = err
		if o.Exit == ExitOK {
			o.Exit = ExitUsage
		}
		full.Run.Exit = o.Exit
	} else {
		r.logger.Info("run recorded", "run", r.info.ID, "store", r.h.store.Path())
	}
	full.Run.State = string(o.State)
	o.Record = full
	r.release()
	r.outcome = o
	done := Event{Kind: EventDone, Time: ended, Task: r.task.ID(), State: o.State}
	if taskErr != nil {
		done.Reason = taskErr.Error()
	}
	r.notify(done)
	r.subs.close()
	close(r.done)
}

func (r *Run) ctxErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx == nil {
		return nil
	}
	return r.ctx.Err()
}

// compile returns the host's compiled module of wasm (of digest
// digest), compiled and checked under cfg (the CompileConfig of the task
// whose module it is: kernel.Limits.CompileLimits), held until the run
// ends.
func (r *Run) compile(ctx context.Context, wasm []byte, digest string, cfg sandbox.CompileConfig) (sandbox.Module, error) {
	// A compile that takes a while (a module's first, before the engine's
	// cache has it) is said, so that a first run is not silent.
	slow := time.AfterFunc(slowStep, func() {
		r.logger.Info("compiling the module (a module's first run compiles it; later runs use the cache)",
			"module", digest[:min(len(digest), len("sha256:")+12)], "bytes", len(wasm))
	})
	e, err := r.cache.acquire(ctx, wasm, digest, cfg)
	slow.Stop()
	if err != nil {
		return nil, err
	}
	r.held = append(r.held, e)
	return e.mod, nil
}

// release closes what the run opened. Its modules are the host's, shared
// with other runs: released, not closed.
func (r *Run) release() {
	for _, e := range r.held {
		r.cache.release(e)
	}
	r.held = nil
	if r.closeKinds != nil {
		r.closeKinds()
	}
}

// exitFor is the exit code of a run whose root task ended in state with
// err.
func exitFor(state kernel.TaskState, err error, interrupted bool) int {
	exit := ExitOK
	switch state {
	case kernel.TaskDone:
	case kernel.TaskTimedOut, kernel.TaskOutOfMemory:
		exit = ExitLimit
	case kernel.TaskKilled:
		exit = ExitTaskFailed
		if interrupted {
			exit = ExitInterrupted
		}
	default:
		exit = ExitTaskFailed
	}
	if err != nil && exit == ExitOK {
		exit = ExitTaskFailed
	}
	return exit
}

// TaskOutputs is what every task of k left: its result, when it set one,
// and what was kept of its stdout and stderr, when there is any; each cut
// to the task's limits.stored_output (kernel.Limits.MaxStoredOutput), the
// cut recorded (Truncated, Dropped: the bytes not kept, so Size is the
// whole). Only what is kept is copied: a task's large result is read, not
// duplicated.
func TaskOutputs(k *kernel.Kernel) []runstore.Output {
	var out []runstore.Output
	for _, t := range k.Tasks() {
		keep := t.Limits().MaxStoredOutput
		if b := t.ResultBlob(); b != nil {
			n := min(int64(b.Len()), keep)
			data := make([]byte, n)
			b.ReadAt(data, 0)
			out = append(out, runstore.Output{Task: t.ID(), Stream: runstore.StreamResult, Data: data,
				Truncated: n < int64(b.Len()), Dropped: int64(b.Len()) - n, Size: int64(b.Len())})
		}
		for _, s := range []struct {
			name string
			o    kernel.Output
		}{{runstore.StreamStdout, t.Stdout()}, {runstore.StreamStderr, t.Stderr()}} {
			if len(s.o.Data) > 0 || s.o.Truncated {
				o := runstore.Output{Task: t.ID(), Stream: s.name, Data: s.o.Data,
					Truncated: s.o.Truncated, Dropped: s.o.Dropped, Size: int64(len(s.o.Data)) + s.o.Dropped, Withheld: s.o.Withheld}
				if int64(len(o.Data)) > keep {
					o.Dropped += int64(len(o.Data)) - keep
					o.Data, o.Truncated = bytes.Clone(o.Data[:keep]), true
				}
				out = append(out, o)
			}
		}
	}
	return out
}

// BuildReceipt describes a finished run: its grants, tasks and the audit
// checkpoint signed after it.
func BuildReceipt(rec *runstore.Record, root string, checkpoint []byte) audit.Receipt {
	runID, manifestPath, moduleDigest, principal, g := rec.Run.ID, rec.Run.Manifest, rec.Run.Digest, rec.Run.Principal, rec.Graph
	r := audit.Receipt{Run: runID, Manifest: manifestPath, Module: moduleDigest, Principal: principal, Checkpoint: string(checkpoint)}
	if b, err := os.ReadFile(manifestPath); err == nil {
		sum := sha256.Sum256(b)
		r.ManifestDigest = "sha256:" + hex.EncodeToString(sum[:])
	}
	for _, c := range g.Caps {
		if c.Holder == root && c.Parent == "" {
			r.Grants = append(r.Grants, audit.ReceiptGrant{Name: c.Name, Kind: c.Kind, Scope: c.Scope,
				When: c.When, ApproveWhen: c.ApproveWhen, Rate: c.Rate, Audited: c.Audited})
		}
	}
	for _, t := range g.Tasks {
		l, _ := json.Marshal(t.Label)
		cl, _ := json.Marshal(t.Clearance)
		r.Tasks = append(r.Tasks, audit.ReceiptTask{ID: t.ID, Parent: t.Parent, Module: t.Module, State: string(t.State), Label: l, Clearance: cl})
	}
	if r.Grants == nil {
		r.Grants = []audit.ReceiptGrant{}
	}
	return r
}

// WriteFileAtomic writes data to a temporary file next to path, syncs it
// and renames it into place, then syncs the directory (best effort).
func WriteFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	// A device, a pipe or a socket (-o /dev/null, -o /dev/stdout) is
	// written to: renaming over it would replace the device node.
	if fi, serr := os.Stat(path); serr == nil && !fi.Mode().IsRegular() {
		if fi.IsDir() {
			return &os.PathError{Op: "write", Path: path, Err: syscall.EISDIR}
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err = f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err = f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
