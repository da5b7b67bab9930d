package kernel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
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
//
// StartChild is the same pipeline for a child the host starts.
func (t *Task) Spawn(ctx context.Context, h abi.Handle, req []byte) (abi.Handle, error) {
	const op = "spawn"
	sc, err := t.table.GetCap(h)
	if err != nil {
		return 0, t.deny(ctx, nil, op, err)
	}
	if err := usable(sc); err != nil {
		return 0, t.deny(ctx, sc, op, err)
	}
	if _, ok := findOp(sc.reg.info.Ops, []byte(kindapi.OpSpawn)); !ok {
		return 0, t.deny(ctx, sc, op, kindapi.Errorf(abi.EWRONGTYPE, "capability %s (%s) is not a spawn capability", sc.id, sc.kind.Name()))
	}
	if len(req) > abi.MaxArgLen {
		return 0, t.deny(ctx, sc, op, kindapi.Errorf(abi.ELIMIT, "spawn request of %d bytes exceeds %d", len(req), abi.MaxArgLen))
	}
	call := t.newCall(sc, kindapi.OpSpawn, req)
	defer freeCall(call)
	var prep kindapi.Op
	err = prepareGuarded(sc.kind, call, &prep)
	if err == nil && prep.Spawn == nil {
		err = kindapi.Errorf(abi.EINTERNAL, "kind %s prepared a spawn without bounds", sc.kind.Name())
	}
	if err != nil {
		return 0, t.refuse(ctx, sc, op, err)
	}
	cr, err := t.guestChild(ctx, sc, prep.Spawn, req)
	if err != nil {
		return 0, t.refuse(ctx, sc, op, err)
	}
	child, th, err := t.spawnChild(ctx, sc, call, &prep, cr)
	if err != nil {
		return 0, err
	}
	child.start(ctx)
	return th, nil
}

// ChildSpec is a child the host starts for a task it keeps (StartChild):
// a session's tool call, for a host that stands for someone the kernel
// does not run (an MCP client's model).
type ChildSpec struct {
	// Module is the child's compiled module; Name and Entry as TaskSpec's.
	Module sandbox.Module
	Name   string
	Entry  string
	// Limits are the child's; their zero fields are the defaults.
	Limits Limits
	// Clearance, when set, must be within the parent's clearance; when
	// nil, the child has the parent's.
	Clearance *kindapi.Label
	// Input is the child's input (what mandate.Input reads), labelled
	// InputLabel joined with the parent's label.
	Input      []byte
	InputLabel kindapi.Label
	// Held are blobs put in the child's table unread (its label does not
	// rise): Held[i] is named by HeldHandle(i), for Input to refer to.
	Held []*kindapi.Blob
	// Caps are capabilities the parent holds, each passed to the child
	// exactly as wide under its name: what the child spends of a
	// capability's uses and budget counts against the parent's, so limits
	// hold across every child a host starts.
	Caps []PassedCap
	// MaxChildren, when positive, bounds how many children the parent may
	// have been given, as a spawn capability's max_children does.
	MaxChildren int
	// RefuseTaintedResult and RefusedResultTaints are TaskSpec's.
	RefuseTaintedResult bool
	RefusedResultTaints kindapi.TaintPatterns
	// Made, when set, is called with the child once it is decided and
	// made, before it runs (to find it by its ID from its first call).
	Made func(*Task)
}

// PassedCap is a capability a host passes to a child it starts.
type PassedCap struct {
	Name string
	Cap  *Cap
}

// HeldHandle is the handle that names ChildSpec.Held[i] in the child's
// table: held blobs are the table's first entries, in order.
func HeldHandle(i int) abi.Handle { return abi.MakeHandle(uint32(i), 1) }

// StartChild starts a child of t as spec asks, for the host: a spawn
// without a spawn capability, planned, reserved, decided (an audited
// "allow" for the start, one "pass" for each capability passed), made and
// concluded by the same code as task_spawn. A refusal at any step
// (clearance, a capability's narrowing, the parent's child limit or the
// kernel's running tasks, the audit write) is audited as a denial of t's
// and leaves nothing behind: no child, nothing minted, every reservation
// given back. The child starts at t's label, within t's clearance:
// whatever the host has shown on t's behalf (Observe), the child's sinks
// are checked against. It runs until it ends, is killed (Kill), or t ends.
func (t *Task) StartChild(ctx context.Context, spec ChildSpec) (*Task, error) {
	const op = "spawn"
	cr, err := t.hostChild(spec)
	if err != nil {
		return nil, t.refuse(ctx, nil, op, err)
	}
	call := t.newCall(nil, kindapi.OpSpawn, cr.describe())
	defer freeCall(call)
	prep := kindapi.Op{NoResult: true}
	child, _, err := t.spawnChild(ctx, nil, call, &prep, cr)
	if err != nil {
		return nil, err
	}
	if spec.Made != nil {
		spec.Made(child.task)
	}
	t.mu.Lock()
	run := t.runCtx
	t.mu.Unlock()
	child.start(run)
	return child.task, nil
}

// spawnChild plans, reserves, decides, makes and concludes a child: the
// pipeline of task_spawn and StartChild, from what was asked to a child
// ready to run. sc is the spawn capability, nil for a host's start (which
// is always audited). Returns the child and its handle in t's table (0
// when prep.NoResult).
//
// The spawn's audit entries (its allow, each capability passed, its
// outcome, or a refusal) are one commit (auditBatch): nothing outside the
// kernel sees the child before it starts, after this returns, so the
// allow is still durable before its effect (law 8), in one fsync instead
// of two or more.
func (t *Task) spawnChild(ctx context.Context, sc *Cap, call *kindapi.Call, prep *kindapi.Op, cr *childRequest) (*pendingChild, abi.Handle, error) {
	bctx, b := withAuditBatch(ctx)
	child, th, err := t.spawnBatched(bctx, b, sc, call, prep, cr)
	if aerr := t.k.flushAudit(ctx, t, b, true); aerr != nil {
		if err == nil {
			// conclude committed the spawn's entries, and nothing in
			// spawnBatched records after it; only an event recorded
			// meanwhile under ctx from elsewhere (an approver that kept
			// it) can be left, and its failure still starts no child.
			if th != 0 {
				t.table.Remove(th)
			}
			child.abort()
			child, th = nil, 0
		}
		err = t.fail("spawn", aerr)
	}
	return child, th, err
}

// spawnBatched is spawnChild under the batch b of ctx.
func (t *Task) spawnBatched(ctx context.Context, b *auditBatch, sc *Cap, call *kindapi.Call, prep *kindapi.Op, cr *childRequest) (*pendingChild, abi.Handle, error) {
	const op = "spawn"
	plan, err := t.planChild(cr)
	if err != nil {
		return nil, 0, t.refuse(ctx, sc, op, err)
	}
	prep.Reserve = plan.reserve
	d := decision{batch: b}
	if err := t.decide(ctx, sc, opName{name: op}, call, prep, modeSpawn, &d); err != nil {
		return nil, 0, err
	}
	child, err := t.makeChild(ctx, plan)
	var e entry
	if err != nil {
		err = kindapi.NotPerformed(err) // nothing ran: the child never started
	} else if !prep.NoResult {
		e = entry{task: child.task}
	}
	th, err := t.conclude(ctx, sc, opName{name: op}, prep, &d, e, err)
	if err != nil {
		switch {
		case child != nil && b.failed():
			child.unmake()
		case child != nil:
			child.abort()
		}
		return nil, 0, err
	}
	return child, th, nil
}

// childRequest is a child asked for, its parts resolved (the module, the
// parent's blobs and capabilities), not yet checked against the parent.
type childRequest struct {
	module      sandbox.Module
	name, entry string
	limits      Limits
	clearance   *kindapi.Label // nil: the parent's
	input       *kindapi.Blob
	held        []*kindapi.Blob
	caps        []passRequest
	maxDepth    int // the spawn capability's bound; MaxSpawnDepth holds anyway
	maxChildren int // 0: no bound but the kernel's running tasks

	refuseTaintedResult bool
	refusedResultTaints kindapi.TaintPatterns
}

// passRequest is a capability asked to be passed.
type passRequest struct {
	name   string
	c      *Cap
	narrow []byte
}

// describe is a host's request as the arguments its audit entries digest.
func (r *childRequest) describe() []byte {
	d := struct {
		Module string   `json:"module"`
		Name   string   `json:"name,omitempty"`
		Caps   []string `json:"caps,omitempty"`
		Held   int      `json:"held,omitempty"`
		Input  string   `json:"input,omitempty"`
	}{Module: r.module.Digest(), Name: r.name, Held: len(r.held)}
	for _, p := range r.caps {
		d.Caps = append(d.Caps, p.name)
	}
	if r.input != nil {
		sum := sha256.Sum256(r.input.Bytes())
		d.Input = hex.EncodeToString(sum[:])
	}
	return mustJSON(d)
}

// guestChild resolves a guest's spawn request under the bounds its spawn
// capability prepared: the module (placed where the bounds say), the
// limits, the input and the capabilities from the parent's table.
func (t *Task) guestChild(ctx context.Context, sc *Cap, b *kindapi.SpawnBounds, raw []byte) (*childRequest, error) {
	k := t.k
	r, err := abi.DecodeSpawnRequest(raw)
	if err != nil {
		return nil, kindapi.Errorf(abi.EINVAL, "spawn: %v", err)
	}
	if r.Module != b.Module {
		return nil, kindapi.Errorf(abi.EINTERNAL, "spawn: kind %s prepared module %s for %s", sc.kind.Name(), b.Module, r.Module)
	}
	// Before the module is resolved or placed: a placement reaches the fleet.
	if err := t.childDepth(b.MaxDepth); err != nil {
		return nil, err
	}
	limits, err := t.childLimits(b, r)
	if err != nil {
		return nil, err
	}
	if k.modules == nil {
		return nil, kindapi.Errorf(abi.ENOTSUP, "spawn: this kernel has no module resolver")
	}
	mod, err := k.modules.Module(ctx, r.Module)
	if err != nil {
		return nil, kindapi.Errorf(abi.EDENIED, "spawn: module %s: %v", r.Module, err)
	}
	if mod.Digest() != r.Module {
		return nil, kindapi.Errorf(abi.EINTERNAL, "spawn: resolver returned %s for %s", mod.Digest(), r.Module)
	}
	if b.Placement != "" {
		if k.placer == nil {
			return nil, kindapi.Errorf(abi.ENOTSUP, "spawn: placement %q needs a kernel on a fleet node (mandate node); this one runs children only here", b.Placement)
		}
		placed, err := k.placer.Place(ctx, b.Placement, mod, k.funcs)
		if err != nil {
			return nil, kindapi.Errorf(abi.EIO, "spawn: placement %q: %v", b.Placement, err)
		}
		if placed.Digest() != r.Module {
			return nil, kindapi.Errorf(abi.EINTERNAL, "spawn: placer returned %s for %s", placed.Digest(), r.Module)
		}
		mod = placed
	}
	cr := &childRequest{module: mod, name: "child", limits: limits, maxDepth: b.MaxDepth, maxChildren: b.MaxChildren}
	if r.Clearance != nil {
		want := kindapi.NewLabel(*r.Clearance, nil)
		cr.clearance = &want
	}
	if r.Input != 0 {
		if cr.input, err = t.table.GetBlob(r.Input); err != nil {
			return nil, err
		}
	}
	if len(r.Caps) > limits.MaxHandles {
		return nil, kindapi.Errorf(abi.ELIMIT, "spawn: %d capabilities passed exceed the child's %d handles", len(r.Caps), limits.MaxHandles)
	}
	for _, pc := range r.Caps {
		c, err := t.table.GetCap(pc.Handle)
		if err != nil {
			return nil, err
		}
		cr.caps = append(cr.caps, passRequest{name: pc.Name, c: c, narrow: []byte(pc.Narrow)})
	}
	return cr, nil
}

// hostChild is a host's ChildSpec as a request: nothing is looked up, the
// host hands the kernel the module, blobs and capabilities themselves.
func (t *Task) hostChild(spec ChildSpec) (*childRequest, error) {
	if spec.Module == nil {
		return nil, kindapi.Errorf(abi.EINVAL, "spawn: the child has no module")
	}
	if spec.Entry != "" && spec.Module.Kind() != sandbox.Reactor {
		return nil, kindapi.Errorf(abi.EINVAL, "spawn: entry %q given but the module is a %s (only reactors have entries)", spec.Entry, spec.Module.Kind())
	}
	t.mu.Lock()
	run := t.runCtx
	t.mu.Unlock()
	if run == nil || run.Err() != nil || t.State() != TaskRunning {
		return nil, kindapi.Errorf(abi.ECHILD, "task %s has ended", t.id)
	}
	limits := spec.Limits.withDefaults()
	cr := &childRequest{module: spec.Module, name: spec.Name, entry: spec.Entry, limits: limits,
		held: spec.Held, maxDepth: MaxSpawnDepth, maxChildren: spec.MaxChildren, refuseTaintedResult: spec.RefuseTaintedResult,
		refusedResultTaints: spec.RefusedResultTaints}
	if spec.Clearance != nil {
		c := *spec.Clearance
		cr.clearance = &c
	}
	if spec.Input != nil {
		if len(spec.Input) > abi.MaxBlobLen || int64(len(spec.Input)) > limits.MaxBlobBytes {
			return nil, kindapi.Errorf(abi.ELIMIT, "spawn: input of %d bytes exceeds the child's blob limit", len(spec.Input))
		}
		cr.input = kindapi.NewBlob(spec.Input, spec.InputLabel.Join(t.Label()))
	}
	for _, b := range spec.Held {
		if b == nil {
			return nil, kindapi.Errorf(abi.EINVAL, "spawn: a held blob is nil")
		}
	}
	for _, p := range spec.Caps {
		if p.Cap == nil || p.Cap.holder != t {
			return nil, kindapi.Errorf(abi.EBADHANDLE, "spawn: the parent does not hold the capability passed as %q", p.Name)
		}
		cr.caps = append(cr.caps, passRequest{name: p.Name, c: p.Cap})
	}
	return cr, nil
}

// pendingChild is a child made but not yet running.
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

// unmake undoes a child whose spawn the audit log could not record: none
// of it is in the log, so none of it stays in the graph either. What was
// passed is revoked and unlinked (the child never ran: nothing was
// derived from it).
func (p *pendingChild) unmake() {
	p.abort()
	k := p.task.k
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range p.passed {
		k.caps = slices.DeleteFunc(k.caps, func(x *Cap) bool { return x == c })
		if parent := c.parent; parent != nil {
			parent.children = slices.DeleteFunc(parent.children, func(x *Cap) bool { return x == c })
		}
	}
}

// childPlan is a child decided but not yet made.
type childPlan struct {
	parent      *Task
	module      sandbox.Module
	name, entry string
	limits      Limits
	clearance   *kindapi.Label
	input       *kindapi.Blob
	held        []*kindapi.Blob
	passed      []passedCap
	depth       int
	maxChildren int

	refuseTaintedResult bool
	refusedResultTaints kindapi.TaintPatterns
}

// passedCap is a capability the parent passes, narrowed as asked.
type passedCap struct {
	name   string
	narrow string
	d      derivation
}

// planChild decides everything about a child that can be decided without
// effect: a refusal here leaves nothing behind.
func (t *Task) planChild(r *childRequest) (*childPlan, error) {
	if err := t.childDepth(r.maxDepth); err != nil {
		return nil, err
	}
	p := &childPlan{parent: t, module: r.module, name: r.name, entry: r.entry, limits: r.limits, clearance: t.clearance,
		input: r.input, held: r.held, depth: t.depth + 1, maxChildren: r.maxChildren,
		refuseTaintedResult: r.refuseTaintedResult, refusedResultTaints: r.refusedResultTaints}
	if r.clearance != nil {
		if pc, bounded := t.Clearance(); bounded && !r.clearance.CanFlowTo(pc) {
			return nil, flowErr("the child's clearance", *r.clearance, pc, "its parent's clearance")
		}
		p.clearance = r.clearance
	}
	label := t.Label()
	if p.clearance != nil && !label.CanFlowTo(*p.clearance) {
		return nil, kindapi.Errorf(abi.EFLOW, "spawn: the child would start at its parent's label, above its clearance: %v",
			flowErr("data", label, *p.clearance, "the child"))
	}
	if p.clearance != nil && r.input != nil && !r.input.Label().CanFlowTo(*p.clearance) {
		return nil, flowErr("the child's input", r.input.Label(), *p.clearance, "the child")
	}
	var heldBytes int64
	for _, b := range r.held {
		if p.clearance != nil && !b.Label().CanFlowTo(*p.clearance) {
			return nil, flowErr("a blob held for the child", b.Label(), *p.clearance, "the child")
		}
		heldBytes += int64(b.Len())
	}
	if heldBytes > r.limits.MaxBlobBytes {
		return nil, kindapi.Errorf(abi.ELIMIT, "spawn: %d bytes of blobs held for the child exceed its blob limit of %d", heldBytes, r.limits.MaxBlobBytes)
	}
	if n := len(r.caps) + len(r.held); n > r.limits.MaxHandles {
		return nil, kindapi.Errorf(abi.ELIMIT, "spawn: %d capabilities and blobs given exceed the child's %d handles", n, r.limits.MaxHandles)
	}
	seen := map[string]bool{}
	for _, pc := range r.caps {
		if seen[pc.name] {
			return nil, kindapi.Errorf(abi.EINVAL, "spawn: capability name %q passed twice", pc.name)
		}
		seen[pc.name] = true
		if err := usable(pc.c); err != nil {
			return nil, fmt.Errorf("passing %q: %w", pc.name, err)
		}
		narrow := pc.narrow
		if len(narrow) == 0 || string(narrow) == "null" {
			narrow = []byte("{}")
		}
		d, err := narrowGuarded(t.k, pc.c, narrow)
		if err != nil {
			return nil, fmt.Errorf("passing %q: %w", pc.name, err)
		}
		p.passed = append(p.passed, passedCap{name: pc.name, narrow: string(narrow), d: d})
	}
	return p, nil
}

// childDepth refuses a child deeper than max or MaxSpawnDepth.
func (t *Task) childDepth(max int) error {
	if depth := t.depth + 1; depth > max || depth > MaxSpawnDepth {
		return kindapi.Errorf(abi.ELIMIT, "spawn: a child would be at depth %d (limit %d)", depth, min(max, MaxSpawnDepth))
	}
	return nil
}

// reserve takes the child's place among the parent's children and the
// kernel's running tasks; the function it returns gives them back.
func (p *childPlan) reserve() (func(), bool, error) {
	t := p.parent
	t.mu.Lock()
	if p.maxChildren > 0 && t.children >= p.maxChildren {
		t.mu.Unlock()
		return nil, false, kindapi.Errorf(abi.ELIMIT, "spawn: task %s has spawned %d children (limit %d)", t.id, t.children, p.maxChildren)
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

// makeChild is the effect of a spawn: the child task, the blobs held for
// it and the capabilities passed to it, each minted for the child and
// audited as it crosses the task boundary, before the child can run.
func (t *Task) makeChild(ctx context.Context, p *childPlan) (*pendingChild, error) {
	k := t.k
	spec := TaskSpec{Module: p.module, Principal: t.principal, Name: p.name, Entry: p.entry, Limits: p.limits,
		RefuseTaintedResult: p.refuseTaintedResult, RefusedResultTaints: p.refusedResultTaints}
	child, err := k.newTask(spec, t)
	if err != nil {
		return nil, err
	}
	child.label = t.Label()
	child.clearance = p.clearance
	child.input = p.input
	pc := &pendingChild{task: child, spec: spec}
	for i, b := range p.held {
		h, err := child.table.InsertBlob(b)
		if err == nil && h != HeldHandle(i) {
			err = kindapi.Errorf(abi.EINTERNAL, "spawn: held blob %d got handle %#x, not %#x", i, uint32(h), uint32(HeldHandle(i)))
		}
		if err != nil {
			return nil, err
		}
	}
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
	t.logger.Info("spawned", "child", child.id, "module", logDigest(p.module.Digest()), "caps", len(pc.passed), "depth", p.depth)
	return pc, nil
}

// childLimits computes a child's limits: what the request asks, or else
// the most the parent may give, and never more than the parent's own
// memory, the time the parent has left, or the spawn capability's bounds.
func (t *Task) childLimits(b *kindapi.SpawnBounds, r abi.SpawnRequest) (Limits, error) {
	memCap := t.limits.Memory
	if m := b.MaxMemory; m > 0 && m < memCap {
		memCap = m
	}
	left := time.Until(t.deadline)
	if left <= 0 {
		return Limits{}, kindapi.Errorf(abi.ELIMIT, "spawn: the parent has no time left")
	}
	timeCap := left
	if d := b.MaxTimeout; d > 0 && d < timeCap {
		timeCap = d
	}
	l := Limits{Memory: memCap, Timeout: timeCap, MaxHandles: t.limits.MaxHandles, MaxOutput: t.limits.MaxOutput,
		MaxBlobBytes: t.limits.MaxBlobBytes, MaxStoredOutput: t.limits.MaxStoredOutput,
		Functions: t.limits.Functions, Locals: t.limits.Locals, Nesting: t.limits.Nesting,
		BrTableTargets: t.limits.BrTableTargets, FunctionSize: t.limits.FunctionSize, CompileMemory: t.limits.CompileMemory}
	if r.Memory > 0 {
		if uint64(r.Memory) > memCap {
			return Limits{}, kindapi.Errorf(abi.EDENIED, "spawn: memory %d exceeds the %d the child may get", r.Memory, memCap)
		}
		l.Memory = uint64(r.Memory)
	}
	if r.Timeout != "" {
		d, err := time.ParseDuration(r.Timeout)
		if err != nil || d <= 0 {
			return Limits{}, kindapi.Errorf(abi.EINVAL, "spawn: timeout %q is not a positive duration", r.Timeout)
		}
		if d > timeCap {
			return Limits{}, kindapi.Errorf(abi.EDENIED, "spawn: timeout %s exceeds the %s the child may get", d, timeCap.Round(time.Millisecond))
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
			return 0, t.fail(op, kindapi.Errorf(abi.ETIMEDOUT, "waiting for %s: %v", child.id, ctx.Err()))
		}
		return 0, t.fail(op, kindapi.Errorf(abi.ECHILD, "child %s ended %s: %v", child.id, child.State(), err))
	}
	res := child.ResultBlob()
	if res == nil {
		return 0, nil
	}
	// The child's bytes, shared (a blob is immutable): a large result is
	// not copied for each task that holds it.
	b := res.Relabeled(res.Label().Join(child.Label()))
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
