package kernel

import (
	"context"
	"fmt"

	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// Host-started children. A host that stands for someone the kernel does
// not run (an MCP client's model: a session) keeps a task for it, whose
// label floats up with what the host showed it (Observe), and starts a
// child of it for each thing it asks for (a tool call), holding exactly
// the child's own grants. The child starts at its parent's label, within
// the parent's clearance: whatever the session has seen, the child's
// sinks are checked against. It ends before its parent ends.

// PendingTask is a child built but not yet running: the host gives it the
// blobs its input refers to (Hold) and its input (SetInput), then starts
// it. A PendingTask that is not started holds nothing once it is dropped.
type PendingTask struct {
	t      *Task
	spec   TaskSpec
	parent *Task
}

// NewChild builds a child of parent with spec's grants, limits and
// clearance, at parent's label. spec.Clearance, when set, must be within
// parent's clearance; when nil, the child has parent's. EFLOW when
// parent's label is above the child's clearance.
func (k *Kernel) NewChild(parent *Task, spec TaskSpec) (*PendingTask, error) {
	if parent == nil {
		return nil, fmt.Errorf("kernel: NewChild: no parent")
	}
	pc, bounded := parent.Clearance()
	switch {
	case spec.Clearance == nil && bounded:
		spec.Clearance = &pc
	case spec.Clearance != nil && bounded && !spec.Clearance.CanFlowTo(pc):
		return nil, Errorf(abi.EFLOW, "the child's clearance %v is above its parent's %v", *spec.Clearance, pc)
	}
	label := parent.Label()
	if spec.Clearance != nil && !label.CanFlowTo(*spec.Clearance) {
		return nil, flowErr("data", label, *spec.Clearance, "the child of "+parent.id)
	}
	if parent.State() != TaskRunning {
		return nil, Errorf(abi.ECHILD, "task %s has ended", parent.id)
	}
	input := spec.Input
	spec.Input = nil // SetInput gives it, with its label
	t, err := k.newTask(spec, parent)
	if err != nil {
		return nil, err
	}
	t.label = label
	if err := k.grant(t, spec.Grants); err != nil {
		return nil, err
	}
	p := &PendingTask{t: t, spec: spec, parent: parent}
	if input != nil {
		if err := p.SetInput(input, Label{}); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Task is the child being built (its ID, its capabilities).
func (p *PendingTask) Task() *Task { return p.t }

// Hold puts b in the child's table, unread (the child's label does not
// rise), and returns its handle for the child's input to name. EFLOW when
// b is above the child's clearance.
func (p *PendingTask) Hold(b *Blob) (abi.Handle, error) { return p.t.hold(b) }

// SetInput sets the child's input (what mandate.Input reads), labelled
// label joined with the child's own label.
func (p *PendingTask) SetInput(data []byte, label Label) error {
	if len(data) > abi.MaxBlobLen || int64(len(data)) > p.t.limits.MaxBlobBytes {
		return Errorf(abi.ELIMIT, "input of %d bytes exceeds the task's blob limit", len(data))
	}
	b := NewBlob(data, label.Join(p.t.Label()))
	if err := p.t.mayHold(b.Label()); err != nil {
		return err
	}
	p.t.input = b
	return nil
}

// Start runs the child. Canceling ctx (a client canceling its call)
// kills it; so does its parent's end. It is counted against the kernel's
// running tasks (ELIMIT past MaxTasks).
func (p *PendingTask) Start(ctx context.Context) error {
	parent := p.parent
	parent.mu.Lock()
	pctx := parent.runCtx
	parent.mu.Unlock()
	if pctx == nil || pctx.Err() != nil {
		return Errorf(abi.ECHILD, "task %s has ended", parent.id)
	}
	if err := p.t.k.admit(); err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(pctx)
	stop := context.AfterFunc(ctx, cancel)
	parent.mu.Lock()
	parent.kids = append(parent.kids, p.t)
	parent.mu.Unlock()
	p.t.launch(cctx, p.spec)
	go func() {
		<-p.t.done
		stop()
		cancel()
	}()
	return nil
}

// Observe raises t's label by l: what the host showed on t's behalf (a
// tool's result returned to the client a session stands for). EFLOW, and
// no change, when l is above t's clearance: the host must then not show
// it.
func (t *Task) Observe(l Label) error {
	if err := t.mayHold(l); err != nil {
		return err
	}
	t.raise(l)
	return nil
}

// Pass gives the child a capability derived from c (which the parent
// holds), exactly as wide, under name: what the child spends of c's uses
// and budget counts against c, so limits hold across every child a host
// starts (a session's tool calls). It is audited as task_spawn's passing
// is.
func (p *PendingTask) Pass(ctx context.Context, c *Cap, name string) error {
	if c == nil || c.holder != p.parent {
		return Errorf(abi.EBADHANDLE, "the parent does not hold the capability passed as %q", name)
	}
	if _, dup := p.t.names[name]; dup {
		return fmt.Errorf("kernel: %q passed twice", name)
	}
	d, err := p.t.k.narrow(c, []byte(`{}`))
	if err != nil {
		return err
	}
	child, err := p.t.k.mint(d, p.t, name, true)
	if err != nil {
		return err
	}
	if _, err := p.t.table.InsertCap(child); err != nil {
		return err
	}
	p.t.names[name] = child
	text := fmt.Sprintf("passed %s to %s as %q", c.id, p.t.id, name)
	return p.t.k.auditText(ctx, p.parent, child, "pass", Allow, nil, text)
}

// CanHold reports, as EFLOW, whether data labelled l is above what t may
// hold (its clearance).
func (t *Task) CanHold(l Label) error { return t.mayHold(l) }

// LastDenial is the errno of the task's last denied call (ESUCCESS when
// none was) and what LastError says of it: why a tool that gave up after
// a refusal failed, for a host to tell its client.
func (t *Task) LastDenial() (abi.Errno, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastDenial, t.lastErr
}

// Discard gives up a child that will not start: every capability passed
// to it is revoked, so nothing it was given stays live.
func (p *PendingTask) Discard() {
	for _, c := range p.t.Caps() {
		p.t.k.Revoke(c)
	}
}
