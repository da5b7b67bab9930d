package kernel

import (
	"context"
	"fmt"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox"
)

// Spawn limits that hold whatever a spawn capability says.
const (
	// MaxSpawnDepth bounds how deep tasks nest: a root task is depth 0.
	MaxSpawnDepth = kindapi.MaxSpawnDepth
	// DefaultMaxTasks is how many tasks may run at once in a kernel
	// (Config.MaxTasks): a spawn bomb stops here whatever its shape.
	DefaultMaxTasks = 256
)

// ModuleResolver finds the compiled module with a digest, for spawn. The
// CLI resolves the modules a manifest names; tests supply their own.
type ModuleResolver interface {
	Module(ctx context.Context, digest string) (sandbox.Module, error)
}

// Spawn starts a child task as the request asks, under the spawn
// capability h names, and returns a handle to it. It runs the same
// pipeline as a call (decide): the spawn kind prepares the request (the
// module allowed, the bounds of the child), the kernel plans the child
// (depth, limits, clearance, input, every capability passed, narrowed as
// asked and never wider) without effect, then reserves (a handle for the
// child, a place among the parent's children and the kernel's running
// tasks, rate tokens and uses of the spawn capability), checks constraints
// and approval, audits, and only then makes the child. Each capability
// passed is an audit entry of its own ("pass"). The child starts at the
// parent's label (spawning never launders), and its limits are no larger
// than the parent's remaining ones.
func (t *Task) Spawn(ctx context.Context, h abi.Handle, req []byte) (abi.Handle, error) {
	const op = "spawn"
	sc, err := t.table.GetCap(h)
	if err != nil {
		return 0, t.deny(ctx, nil, op, err)
	}
	if err := usable(sc); err != nil {
		return 0, t.deny(ctx, sc, op, err)
	}
	if _, ok := findOp(sc.reg.info.Ops, []byte(OpSpawn)); !ok {
		return 0, t.deny(ctx, sc, op, Errorf(abi.EWRONGTYPE, "capability %s (%s) is not a spawn capability", sc.id, sc.kind.Name()))
	}
	if len(req) > abi.MaxArgLen {
		return 0, t.deny(ctx, sc, op, Errorf(abi.ELIMIT, "spawn request of %d bytes exceeds %d", len(req), abi.MaxArgLen))
	}
	call := t.newCall(sc, OpSpawn, req)
	defer freeCall(call)
	var prep Op
	err = prepareGuarded(sc.kind, call, &prep)
	if err == nil && prep.Spawn == nil {
		err = Errorf(abi.EINTERNAL, "kind %s prepared a spawn without bounds", sc.kind.Name())
	}
	if err != nil {
		return 0, t.refuse(ctx, sc, op, err)
	}
	plan, err := t.planChild(ctx, sc, prep.Spawn, req)
	if err != nil {
		return 0, t.refuse(ctx, sc, op, err)
	}
	prep.Reserve = plan.reserve
	var d decision
	if err := t.decide(ctx, sc, opName{name: op}, call, &prep, modeSpawn, &d); err != nil {
		return 0, err
	}
	child, err := t.makeChild(ctx, plan)
	var e entry
	if err != nil {
		err = NotPerformed(err) // nothing ran: the child never started
	} else {
		e = entry{task: child.task}
	}
	th, err := t.conclude(ctx, sc, opName{name: op}, &prep, &d, e, err)
	if err != nil {
		if child != nil {
			child.abort()
		}
		return 0, err
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

func (p *pendingChild) start(ctx context.Context) {
	parent := p.task.parent
	parent.mu.Lock()
	parent.kids = append(parent.kids, p.task)
	parent.mu.Unlock()
	p.task.launch(ctx, p.spec)
}

// abort undoes a child that will not run: what was passed is revoked.
// Its place among running tasks is given back by the reservation.
func (p *pendingChild) abort() {
	for _, c := range p.passed {
		p.task.k.Revoke(c)
	}
}

// childPlan is a child decided but not yet made.
type childPlan struct {
	parent    *Task
	module    sandbox.Module
	limits    Limits
	clearance *Label
	input     *Blob
	passed    []passedCap
	depth     int
	bounds    *SpawnBounds
}

// passedCap is a capability the parent passes, narrowed as asked.
type passedCap struct {
	name   string
	narrow string
	d      derivation
}

// planChild decides everything about a child that can be decided without
// effect: a refusal here leaves nothing behind.
func (t *Task) planChild(ctx context.Context, sc *Cap, b *SpawnBounds, raw []byte) (*childPlan, error) {
	k := t.k
	r, err := abi.DecodeSpawnRequest(raw)
	if err != nil {
		return nil, Errorf(abi.EINVAL, "spawn: %v", err)
	}
	if r.Module != b.Module {
		return nil, Errorf(abi.EINTERNAL, "spawn: kind %s prepared module %s for %s", sc.kind.Name(), b.Module, r.Module)
	}
	depth := t.depth + 1
	if depth > b.MaxDepth || depth > MaxSpawnDepth {
		return nil, Errorf(abi.ELIMIT, "spawn: a child would be at depth %d (limit %d)", depth, min(b.MaxDepth, MaxSpawnDepth))
	}
	limits, err := t.childLimits(b, r)
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
	if b.Placement != "" {
		if k.placer == nil {
			return nil, Errorf(abi.ENOTSUP, "spawn: placement %q needs a kernel on a fleet node (mandate node); this one runs children only here", b.Placement)
		}
		placed, err := k.placer.Place(ctx, b.Placement, mod, k.funcs)
		if err != nil {
			return nil, Errorf(abi.EIO, "spawn: placement %q: %v", b.Placement, err)
		}
		if placed.Digest() != r.Module {
			return nil, Errorf(abi.EINTERNAL, "spawn: placer returned %s for %s", placed.Digest(), r.Module)
		}
		mod = placed
	}
	p := &childPlan{parent: t, module: mod, limits: limits, clearance: t.clearance, depth: depth, bounds: b}
	if r.Clearance != nil {
		want := NewLabel(*r.Clearance, nil)
		if pc, bounded := t.Clearance(); bounded && !want.CanFlowTo(pc) {
			return nil, flowErr("the child's clearance", want, pc, "its parent's clearance")
		}
		p.clearance = &want
	}
	label := t.Label()
	if p.clearance != nil && !label.CanFlowTo(*p.clearance) {
		return nil, Errorf(abi.EFLOW, "spawn: the child would start at its parent's label, above its clearance: %v",
			flowErr("data", label, *p.clearance, "the child"))
	}
	if r.Input != 0 {
		in, err := t.table.GetBlob(r.Input)
		if err != nil {
			return nil, err
		}
		if p.clearance != nil && !in.Label().CanFlowTo(*p.clearance) {
			return nil, flowErr("the child's input", in.Label(), *p.clearance, "the child")
		}
		p.input = in
	}
	if len(r.Caps) > limits.MaxHandles {
		return nil, Errorf(abi.ELIMIT, "spawn: %d capabilities passed exceed the child's %d handles", len(r.Caps), limits.MaxHandles)
	}
	seen := map[string]bool{}
	for _, pc := range r.Caps {
		if seen[pc.Name] {
			return nil, Errorf(abi.EINVAL, "spawn: capability name %q passed twice", pc.Name)
		}
		seen[pc.Name] = true
		c, err := t.table.GetCap(pc.Handle)
		if err != nil {
			return nil, err
		}
		if err := usable(c); err != nil {
			return nil, fmt.Errorf("passing %q: %w", pc.Name, err)
		}
		narrow := []byte(pc.Narrow)
		if len(narrow) == 0 || string(narrow) == "null" {
			narrow = []byte("{}")
		}
		d, err := narrowGuarded(k, c, narrow)
		if err != nil {
			return nil, fmt.Errorf("passing %q: %w", pc.Name, err)
		}
		p.passed = append(p.passed, passedCap{name: pc.Name, narrow: string(narrow), d: d})
	}
	return p, nil
}

// reserve takes the child's place among the parent's children and the
// kernel's running tasks; the function it returns gives them back.
func (p *childPlan) reserve() (func(), bool, error) {
	t := p.parent
	t.mu.Lock()
	if t.children >= p.bounds.MaxChildren {
		t.mu.Unlock()
		return nil, false, Errorf(abi.ELIMIT, "spawn: task %s has spawned %d children (limit %d)", t.id, t.children, p.bounds.MaxChildren)
	}
	t.children++
	t.mu.Unlock()
	if err := t.k.admit(); err != nil {
		t.mu.Lock()
		t.children--
		t.mu.Unlock()
		return nil, false, err
	}
	return func() {
		t.mu.Lock()
		t.children--
		t.mu.Unlock()
		t.k.live.Add(-1)
	}, false, nil
}

// makeChild is the effect of a spawn: the child task and the capabilities
// passed to it, each minted for the child and audited as it crosses the
// task boundary, before the child can run.
func (t *Task) makeChild(ctx context.Context, p *childPlan) (*pendingChild, error) {
	k := t.k
	spec := TaskSpec{Module: p.module, Principal: t.principal, Name: "child", Limits: p.limits}
	child, err := k.newTask(spec, t)
	if err != nil {
		return nil, err
	}
	child.label = t.Label()
	child.clearance = p.clearance
	child.input = p.input
	pc := &pendingChild{task: child, spec: spec}
	for _, pass := range p.passed {
		d, err := k.mint(pass.d, child, pass.name, true)
		if err != nil {
			pc.abort()
			return nil, fmt.Errorf("passing %q: %w", pass.name, err)
		}
		pc.passed = append(pc.passed, d)
		if _, err := child.table.InsertCap(d); err != nil {
			pc.abort()
			return nil, err
		}
		child.names[pass.name] = d
		text := fmt.Sprintf("passed %s to %s as %q, narrowed by %s", d.parent.id, child.id, pass.name, pass.narrow)
		if err := k.auditText(ctx, t, d, "pass", Allow, nil, text); err != nil {
			pc.abort()
			return nil, err
		}
	}
	t.logger.Info("spawned", "child", child.id, "module", p.module.Digest(), "caps", len(pc.passed), "depth", p.depth)
	return pc, nil
}

// childLimits computes a child's limits: what the request asks, or else
// the most the parent may give, and never more than the parent's own
// memory, the time the parent has left, or the spawn capability's bounds.
func (t *Task) childLimits(b *SpawnBounds, r abi.SpawnRequest) (Limits, error) {
	memCap := t.limits.Memory
	if m := b.MaxMemory; m > 0 && m < memCap {
		memCap = m
	}
	left := time.Until(t.deadline)
	if left <= 0 {
		return Limits{}, Errorf(abi.ELIMIT, "spawn: the parent has no time left")
	}
	timeCap := left
	if d := b.MaxTimeout; d > 0 && d < timeCap {
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
	b := kindapi.NewBlobOwned(res.Bytes(), res.Label().Join(child.Label()))
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
