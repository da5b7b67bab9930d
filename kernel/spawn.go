package kernel

import (
	"context"
	"fmt"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/sandbox"
)

// Spawn limits that hold whatever a spawn capability says.
const (
	// MaxSpawnDepth bounds how deep tasks nest: a root task is depth 0.
	MaxSpawnDepth = 8
	// DefaultMaxTasks is how many tasks may run at once in a kernel
	// (Config.MaxTasks): a spawn bomb stops here whatever its shape.
	DefaultMaxTasks = 256
)

// ModuleResolver finds the compiled module with a digest, for spawn. The
// CLI resolves the modules a manifest names; tests supply their own.
type ModuleResolver interface {
	Module(ctx context.Context, digest string) (sandbox.Module, error)
}

// SpawnScope is the scope of a spawn capability (caps/spawn): which
// modules a task may start as children, how deep and how many, and the
// most memory and time each child may get.
type SpawnScope interface {
	Scope
	AllowsModule(digest string) bool
	// MaxDepth bounds the depth of a child (the holder's depth + 1).
	MaxDepth() int
	// MaxChildren bounds how many children one task may spawn.
	MaxChildren() int
	// MaxMemory and MaxTimeout bound each child; 0 means no bound beyond
	// the parent's own limits.
	MaxMemory() uint64
	MaxTimeout() time.Duration
}

// Spawn starts a child task as the request asks, under the spawn
// capability h names, and returns a handle to it. Law 3 holds for
// children: every capability passed is derived anew for the child
// (narrowed as asked, never wider), the child starts at the parent's label
// (spawning never launders), and its limits are no larger than the
// parent's remaining ones.
func (t *Task) Spawn(ctx context.Context, h abi.Handle, req []byte) (abi.Handle, error) {
	const op = "spawn"
	sc, err := t.table.GetCap(h)
	if err != nil {
		return 0, t.deny(ctx, nil, op, err)
	}
	if err := usable(sc); err != nil {
		return 0, t.deny(ctx, sc, op, err)
	}
	scope, ok := sc.scope.(SpawnScope)
	if !ok {
		return 0, t.deny(ctx, sc, op, Errorf(abi.EWRONGTYPE, "capability %s (%s) is not a spawn capability", sc.id, sc.kind.Name()))
	}
	child, err := t.spawn(ctx, sc, scope, req)
	if err != nil {
		if isDenial(err) {
			return 0, t.deny(ctx, sc, op, err)
		}
		return 0, t.fail(op, err)
	}
	th, err := t.table.InsertTask(child.task)
	if err != nil {
		child.abort()
		return 0, t.deny(ctx, sc, op, err)
	}
	child.start(ctx)
	return th, nil
}

// pendingChild is a child built but not yet running.
type pendingChild struct {
	task   *Task
	spec   TaskSpec
	passed []*Cap
}

func (p *pendingChild) start(ctx context.Context) { p.task.launch(ctx, p.spec) }

// abort undoes a child that will not run: what was passed is revoked and
// its place among running tasks given back.
func (p *pendingChild) abort() {
	for _, c := range p.passed {
		p.task.k.Revoke(c)
	}
	p.task.k.live.Add(-1)
}

func (t *Task) spawn(ctx context.Context, sc *Cap, scope SpawnScope, raw []byte) (*pendingChild, error) {
	k := t.k
	r, err := abi.DecodeSpawnRequest(raw)
	if err != nil {
		return nil, Errorf(abi.EINVAL, "spawn: %v", err)
	}
	if err := t.constrain(ctx, sc, &Call{Op: "spawn", Args: raw, Scope: sc.scope, Task: t.info, Logger: t.logger, blob: t.resolveBlob, task: t, cap: sc}); err != nil {
		return nil, err
	}
	if !scope.AllowsModule(r.Module) {
		return nil, Errorf(abi.EDENIED, "spawn: module %s is not allowed by %s", r.Module, sc.id)
	}
	depth := t.depth + 1
	if depth > scope.MaxDepth() || depth > MaxSpawnDepth {
		return nil, Errorf(abi.ELIMIT, "spawn: a child would be at depth %d (limit %d)", depth, min(scope.MaxDepth(), MaxSpawnDepth))
	}
	limits, err := t.childLimits(scope, r)
	if err != nil {
		return nil, err
	}
	if k.modules == nil {
		return nil, Errorf(abi.ENOTSUP, "spawn: this kernel has no module resolver")
	}
	mod, err := k.modules.Module(ctx, r.Module)
	if err != nil {
		return nil, Errorf(abi.EDENIED, "spawn: module %s: %v", r.Module, err)
	}
	if mod.Digest() != r.Module {
		return nil, Errorf(abi.EINTERNAL, "spawn: resolver returned %s for %s", mod.Digest(), r.Module)
	}
	t.mu.Lock()
	if t.children >= scope.MaxChildren() {
		t.mu.Unlock()
		return nil, Errorf(abi.ELIMIT, "spawn: task %s has spawned %d children (limit %d)", t.id, t.children, scope.MaxChildren())
	}
	t.children++
	t.mu.Unlock()
	// A refused spawn started no child: it does not use up max_children.
	spawned := false
	defer func() {
		if !spawned {
			t.mu.Lock()
			t.children--
			t.mu.Unlock()
		}
	}()

	spec := TaskSpec{Module: mod, Principal: t.principal, Name: "child", Limits: limits}
	child, err := k.newTask(spec, t)
	if err != nil {
		return nil, err
	}
	child.label = t.Label()
	child.clearance = t.clearance
	if r.Clearance != nil {
		want := NewLabel(*r.Clearance, nil)
		if pc, bounded := t.Clearance(); bounded && !want.CanFlowTo(pc) {
			return nil, flowErr("the child's clearance", want, pc, "its parent's clearance")
		}
		child.clearance = &want
	}
	if err := child.mayHold(child.label); err != nil {
		return nil, Errorf(abi.EFLOW, "spawn: the child would start at its parent's label, above its clearance: %v", err)
	}
	if r.Input != 0 {
		in, err := t.table.GetBlob(r.Input)
		if err != nil {
			return nil, err
		}
		if err := child.mayHold(in.label); err != nil {
			return nil, err
		}
		child.input = in
	}
	var passed []*Cap
	undo := func() {
		for _, c := range passed {
			k.Revoke(c)
		}
	}
	for _, pc := range r.Caps {
		c, err := t.table.GetCap(pc.Handle)
		if err != nil {
			undo()
			return nil, err
		}
		narrow := []byte(pc.Narrow)
		if len(narrow) == 0 || string(narrow) == "null" {
			narrow = []byte("{}")
		}
		d, err := deriveGuarded(k, c, child, narrow)
		if err != nil {
			undo()
			return nil, fmt.Errorf("passing %q: %w", pc.Name, err)
		}
		passed = append(passed, d)
		d.name = pc.Name
		if _, err := child.table.InsertCap(d); err != nil {
			undo()
			return nil, err
		}
		child.names[pc.Name] = d
	}
	if err := k.admit(); err != nil {
		undo()
		return nil, err
	}
	t.logger.Info("spawned", "child", child.id, "module", r.Module, "caps", len(passed), "depth", depth)
	spawned = true
	return &pendingChild{task: child, spec: spec, passed: passed}, nil
}

// childLimits computes a child's limits: what the request asks, or else
// the most the parent may give, and never more than the parent's own
// memory, the time the parent has left, or the spawn capability's bounds.
func (t *Task) childLimits(scope SpawnScope, r abi.SpawnRequest) (Limits, error) {
	memCap := t.limits.Memory
	if m := scope.MaxMemory(); m > 0 && m < memCap {
		memCap = m
	}
	left := time.Until(t.deadline)
	if left <= 0 {
		return Limits{}, Errorf(abi.ELIMIT, "spawn: the parent has no time left")
	}
	timeCap := left
	if d := scope.MaxTimeout(); d > 0 && d < timeCap {
		timeCap = d
	}
	l := Limits{Memory: memCap, Timeout: timeCap, MaxHandles: t.limits.MaxHandles, MaxOutput: t.limits.MaxOutput,
		MaxBlobBytes: t.limits.MaxBlobBytes}
	if r.Memory > 0 {
		if uint64(r.Memory) > memCap {
			return Limits{}, Errorf(abi.EDENIED, "spawn: memory %d exceeds the %d the child may get", r.Memory, memCap)
		}
		l.Memory = uint64(r.Memory)
	}
	if r.Timeout != "" {
		d, err := time.ParseDuration(r.Timeout)
		if err != nil || d <= 0 {
			return Limits{}, Errorf(abi.EINVAL, "spawn: timeout %q is not a positive duration", r.Timeout)
		}
		if d > timeCap {
			return Limits{}, Errorf(abi.EDENIED, "spawn: timeout %s exceeds the %s the child may get", d, timeCap.Round(time.Millisecond))
		}
		l.Timeout = d
	}
	return l, nil
}

// WaitChild waits for the child th names and returns a handle to its
// result blob (0 when it set none). A child that did not finish normally
// is ECHILD, its reason in last_error. The result carries the child's
// label: the parent's label rises only if it reads it.
func (t *Task) WaitChild(ctx context.Context, th abi.Handle) (abi.Handle, error) {
	const op = "task_wait"
	child, err := t.table.GetTask(th)
	if err != nil {
		return 0, t.deny(ctx, nil, op, err)
	}
	if err := child.Wait(ctx); err != nil {
		if ctx.Err() != nil {
			return 0, t.fail(op, Errorf(abi.ETIMEDOUT, "waiting for %s: %v", child.id, ctx.Err()))
		}
		return 0, t.fail(op, Errorf(abi.ECHILD, "child %s ended %s: %v", child.id, child.State(), err))
	}
	res := child.ResultBlob()
	if res == nil {
		return 0, nil
	}
	b := newBlobOwned(res.data, res.label.Join(child.Label()))
	h, err := t.hold(b)
	if err != nil {
		return 0, t.fail(op, err)
	}
	return h, nil
}

// KillChild stops the child th names.
func (t *Task) KillChild(ctx context.Context, th abi.Handle) error {
	child, err := t.table.GetTask(th)
	if err != nil {
		return t.deny(ctx, nil, "task_kill", err)
	}
	child.Kill()
	t.logger.Info("killed child", "child", child.id)
	return nil
}
