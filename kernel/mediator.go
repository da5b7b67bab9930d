package kernel

import (
	"time"

	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// The mediator: every operation a guest asks for, after its arguments were
// copied out of guest memory (hostcall.go). Each method follows the call
// path of ARCHITECTURE.md, resolving handles in the task's own table only,
// and returns an *Error whose errno the guest sees. Every denial is audited
// and recorded as the task's last error.

// deny records a refused operation: audit first, then the task's last
// error and the log line. It returns the error to hand back (an audit
// failure replaces it).
func (t *Task) deny(ctx context.Context, c *Cap, op string, err error) error {
	if aerr := t.k.audit(ctx, t, c, op, Deny, err); aerr != nil {
		err = aerr
	}
	t.mu.Lock()
	t.lastErr = op + ": " + err.Error()
	t.lastDenial = ErrnoOf(err)
	t.denials++
	t.mu.Unlock()
	args := []any{"op", op, "errno", ErrnoOf(err).String(), "error", err}
	if c != nil {
		args = append(args, "cap", c.id, "kind", c.kind.Name())
	}
	t.logger.Warn("denied", args...)
	return err
}

// fail records a failed effect (not a denial) as the task's last error.
func (t *Task) fail(op string, err error) error {
	t.mu.Lock()
	t.lastErr = op + ": " + err.Error()
	t.mu.Unlock()
	t.logger.Debug("call failed", "op", op, "errno", ErrnoOf(err).String(), "error", err)
	return err
}

// usable checks the state of a capability before any use.
func usable(c *Cap) error {
	if c.Revoked() {
		return Errorf(abi.EREVOKED, "capability %s was revoked", c.id)
	}
	return nil
}

// Lookup returns the handle of the root grant with the given name.
func (t *Task) Lookup(ctx context.Context, name string) (abi.Handle, error) {
	const op = "lookup"
	t.mu.Lock()
	c, ok := t.names[name]
	t.mu.Unlock()
	if !ok || c.dropped.Load() {
		return 0, t.fail(op, Errorf(abi.ENOTFOUND, "no capability named %q", name))
	}
	// The name's handle is found by scanning: root grants are few.
	t.table.mu.Lock()
	defer t.table.mu.Unlock()
	for i := range t.table.slots {
		if s := &t.table.slots[i]; s.used && s.entry.cap == c {
			return abi.MakeHandle(uint32(i), s.gen), nil
		}
	}
	return 0, t.fail(op, Errorf(abi.ENOTFOUND, "no capability named %q", name))
}

// Invoke performs op on the capability h names with the guest's argument
// document, returning the handle of the result blob (0 when the operation
// returns nothing).
func (t *Task) Invoke(ctx context.Context, h abi.Handle, op string, args []byte) (abi.Handle, error) {
	return t.invoke(ctx, h, []byte(op), args)
}

// invoke is Invoke with the operation name as the guest's bytes: it is
// matched against the kind's operations without allocating. It is the
// pipeline's first two steps for cap_call (lookup, revocation) and the
// kind's Prepare; decide does the rest.
func (t *Task) invoke(ctx context.Context, h abi.Handle, op []byte, args []byte) (abi.Handle, error) {
	c, err := t.table.GetCap(h)
	if err != nil {
		return 0, t.deny(ctx, nil, "call:"+string(op), err)
	}
	if err := usable(c); err != nil {
		return 0, t.deny(ctx, c, "call:"+string(op), err)
	}
	kop, ok := findOp(c.reg.info.Ops, op)
	if !ok || kop == OpSpawn {
		return 0, t.deny(ctx, c, "call:"+string(op), Errorf(abi.ENOTSUP, "kind %s has no operation %q", c.kind.Name(), op))
	}
	if len(args) > abi.MaxArgLen {
		return 0, t.deny(ctx, c, "call:"+kop, Errorf(abi.ELIMIT, "arguments of %d bytes exceed %d", len(args), abi.MaxArgLen))
	}
	call := t.newCall(c, kop, args)
	defer freeCall(call)
	var prep Op
	if err := prepareGuarded(c.kind, call, &prep); err != nil {
		return 0, t.refuse(ctx, c, "call:"+kop, err)
	}
	var d decision
	if err := t.decide(ctx, c, opName{"call:", kop}, call, &prep, modeCall, &d); err != nil {
		return 0, err
	}
	res, err := runEffect(ctx, c.kind, prep.Effect)
	var e entry
	if err == nil && res != nil {
		e, err = t.resultBlob(c, call, res, &prep)
	}
	return t.conclude(ctx, c, opName{"call:", kop}, &prep, &d, e, err)
}

// resultBlob turns what an effect returned into the blob to install. What
// the kind read through Call.Blob may be in its result (a copy, a server's
// echo): the result carries those blobs' labels too, so handing a blob to
// a kind never launders it.
func (t *Task) resultBlob(c *Cap, call *Call, res *Result, prep *Op) (entry, error) {
	if res.Free {
		prep.Free = true // conclude gives the reservation back
	}
	if res.Spent != nil && *res.Spent < prep.Amount {
		prep.Amount = max(*res.Spent, 0) // conclude settles the reservation
	}
	if len(res.Data) > abi.MaxBlobLen {
		return entry{}, Errorf(abi.ELIMIT, "result of %d bytes exceeds %d", len(res.Data), abi.MaxBlobLen)
	}
	// What the call carried in (the task's label, the blobs spliced)
	// labels every part of the result too.
	in := Label{}
	if !c.reg.lowers {
		in = t.Label()
		for i := range call.NumSpliced() {
			in = in.Join(call.SplicedAt(i).Label())
		}
	}
	if len(res.Parts) == 0 {
		return entry{blob: kindapi.NewBlobOwned(res.Data, res.Label.Join(in))}, nil
	}
	parts := make([]kindapi.PartLabel, len(res.Parts))
	for i, p := range res.Parts {
		parts[i] = kindapi.PartLabel{Pattern: p.Pattern, Label: p.Label.Join(in)}
	}
	b, err := kindapi.NewBlobParts(res.Data, res.Label.Join(in), parts)
	if err != nil {
		return entry{}, Errorf(abi.EINTERNAL, "kind %s labelled its result's parts wrongly: %v", c.kind.Name(), err)
	}
	return entry{blob: b}, nil
}

// newCall takes a Call from the pool for a call on c.
func (t *Task) newCall(c *Cap, op string, args []byte) *Call {
	call := callPool.Get().(*Call)
	call.Init(op, args, c.scope, t.info, t.logger, t.resolveBlob, t.labelOf)
	return call
}

func freeCall(call *Call) {
	*call = Call{}
	callPool.Put(call)
}

// refuse records err from a step before any effect: a denial (audited and
// counted) or a malformed request (the task's last error).
func (t *Task) refuse(ctx context.Context, c *Cap, op string, err error) error {
	if isDenial(err) {
		return t.deny(ctx, c, op, err)
	}
	return t.fail(op, err)
}

// decide and conclude are the one mediation pipeline, shared by cap_call,
// cap_derive and task_spawn once the capability was looked up, found
// usable and the call prepared (docs/ARCHITECTURE.md, "the mediation
// pipeline"). decide runs
//
//	reserve (a handle slot for the result, the kind's own reservation,
//	rate tokens, uses and budget)
//	-> flow (the task's label and every spliced blob against the sink)
//	-> constraints (every when of the chain; which approve_when match)
//	-> approval (the person sees the prepared effect)
//	-> audit allow (durable, when the capability is audited)
//
// and returns nil when the caller may perform the effect; conclude then
// audits the outcome, commits the reservations and installs the result. A
// refusal at any step of decide releases what was reserved and records
// the denial: no effect, no debit, no token, no handle, and no "allow" in
// the log. They are two functions rather than one taking the effect as a
// closure so that a call allocates nothing on the common path.
func (t *Task) decide(ctx context.Context, c *Cap, op opName, call *Call, prep *Op, mode callMode, d *decision) error {
	// Reserve.
	if err := t.reserve(c, prep, mode, &d.r); err != nil {
		return t.deny(ctx, c, op.String(), err)
	}
	refuse := func(err error) error {
		d.r.release(t.table)
		return t.deny(ctx, c, op.String(), err)
	}
	// Flow.
	if prep.Sink != nil {
		if err := checkFlow("task ", t.id, t.Label(), prep.Sink, c); err != nil {
			return refuse(err)
		}
		for i := range call.NumSpliced() {
			if err := checkFlow("a spliced blob", "", call.SplicedAt(i).Label(), prep.Sink, c); err != nil {
				return refuse(err)
			}
		}
	}
	// Constraints, then approval.
	var reasons []string
	if mode != modeDerive && c.chain&chainConstraints != 0 {
		need, err := checkConstraints(ctx, c, call, prep, &d.r)
		if err != nil {
			return refuse(err)
		}
		reasons = need
	}
	if prep.NeedsApproval != "" {
		reasons = append([]string{prep.NeedsApproval}, reasons...)
	}
	if len(reasons) > 0 {
		eff := showDefault(call.Op, call.Args)
		if prep.Show != nil {
			eff = prep.Show()
		}
		if err := t.approve(ctx, c, call.Op, eff, reasons); err != nil {
			return refuse(err)
		}
	}
	// Audit allow, durable before the effect (law 8).
	if c.audit {
		sum := sha256.Sum256(call.Args)
		d.digest = hex.EncodeToString(sum[:])
		if err := t.k.auditCall(ctx, t, c, op.String(), Allow, nil, d.digest); err != nil {
			d.r.release(t.table)
			return t.fail(op.String(), err)
		}
	}
	return nil
}

// decision is a call that passed decide: what it holds until conclude.
type decision struct {
	r      reservation
	digest string // of the arguments, for the audit entries
}

// conclude ends a decided call whose effect returned e and err: the
// outcome is audited, the reservations are committed (or given back when
// the effect did nothing: NotPerformed, Result.Free) and e is installed in
// the reserved slot.
func (t *Task) conclude(ctx context.Context, c *Cap, op opName, prep *Op, d *decision, e entry, err error) (abi.Handle, error) {
	if c.audit {
		if aerr := t.k.auditCall(ctx, t, c, op.String(), Outcome, err, d.digest); aerr != nil && err == nil {
			err = aerr
		}
	}
	r := &d.r
	if err != nil {
		if kindapi.Performed(err) {
			r.commit() // the effect may have happened: it counts
		}
		r.release(t.table)
		if isDenial(err) {
			return 0, t.deny(ctx, c, op.String(), err)
		}
		return 0, t.fail(op.String(), err)
	}
	// An effect that turned out to spend nothing (Result.Free) gives its
	// uses and budget back, and is not a use in a history; its rate
	// token stays spent.
	if prep.Free {
		r.forgetUse()
	}
	if prep.Free && r.allowed != nil {
		releaseAllowance(r.allowed, r.amount)
		r.allowed = nil
	}
	// An effect that spent less than it reserved (Result.Spent) gives the
	// rest back, keeping its use.
	if r.allowed != nil && prep.Amount < r.amount {
		refundAmount(r.allowed, r.amount-prep.Amount)
		r.amount = prep.Amount
	}
	r.commit()
	if e == (entry{}) {
		r.unslot(t.table)
		return 0, nil
	}
	h, err := r.install(t, e)
	if err != nil {
		return 0, t.fail(op.String(), err)
	}
	return h, nil
}

// opName names a call in audit entries and errors ("call:fetch",
// "derive"), joined only when one is written, so that an allowed call
// builds no string.
type opName struct{ prefix, name string }

func (o opName) String() string { return o.prefix + o.name }

// callMode is which host call a decision is for.
type callMode int

const (
	modeCall   callMode = iota // cap_call
	modeDerive                 // cap_derive: no use, no rate token, no constraint of the parent's
	modeSpawn                  // task_spawn
)

// reservation is what a call holds while it is decided: a table slot for
// its result, rate tokens and uses on the capability's chain.
type reservation struct {
	slot    int  // -1: none
	rated   *Cap // the capability whose chain gave rate tokens; nil: none
	allowed *Cap // the capability whose chain gave uses and budget; nil: none
	amount  int64
	undo    func() // gives back Op.Reserve's reservation
	use     *use   // the call, pending in its chain's histories (history.go); nil: none
	settled bool   // rates, allowances and the use committed or released
}

// reserve takes everything the call needs before any check that can
// refuse it, all or nothing.
func (t *Task) reserve(c *Cap, prep *Op, mode callMode, r *reservation) error {
	r.slot = -1
	if !prep.NoResult {
		slot, err := t.table.reserve()
		if err != nil {
			return err
		}
		r.slot = slot
	}
	if mode == modeDerive {
		r.settled = true
		return nil
	}
	if prep.Reserve != nil {
		undo, free, err := prep.Reserve()
		if err != nil {
			r.release(t.table)
			return err
		}
		r.undo = undo
		if free {
			prep.Free = true
		}
	}
	if c.chain&chainRate != 0 {
		took, err := takeRate(c, time.Now)
		if err != nil {
			r.release(t.table)
			return err
		}
		if took {
			r.rated = c
		}
	}
	if !prep.Free {
		if c.chain&chainAllowance != 0 {
			if err := reserveAllowance(c, prep.Amount); err != nil {
				r.release(t.table)
				return err
			}
			r.allowed, r.amount = c, prep.Amount
		}
	}
	return nil
}

// release gives back everything not yet committed.
func (r *reservation) release(tab *CapTable) {
	if !r.settled {
		if r.rated != nil {
			giveRate(r.rated)
		}
		if r.allowed != nil {
			releaseAllowance(r.allowed, r.amount)
		}
		if r.undo != nil {
			r.undo()
		}
		r.forgetUse()
		r.settled = true
	}
	r.unslot(tab)
}

// commit keeps the rate tokens and uses: the effect happened.
func (r *reservation) commit() {
	r.keepUse()
	r.settled = true
}

func (r *reservation) unslot(tab *CapTable) {
	if r.slot >= 0 {
		tab.unreserve(r.slot)
		r.slot = -1
	}
}

// install puts e in the reserved slot, after checking that a blob may
// enter the task (its clearance, the bytes it may hold).
func (r *reservation) install(t *Task, e entry) (abi.Handle, error) {
	if e.blob != nil {
		if err := t.mayHold(e.blob.Label()); err != nil {
			r.unslot(t.table)
			return 0, err
		}
	}
	h, err := t.table.fill(r.slot, e)
	r.slot = -1
	return h, err
}

// callPool recycles Calls: a kind must not keep a Call, or its Args, past
// its Effect (see Kind.Prepare).
var callPool = sync.Pool{New: func() any { return new(Call) }}

func findOp(ops []string, op []byte) (string, bool) {
	for _, o := range ops {
		if o == string(op) {
			return o, true
		}
	}
	return "", false
}

// prepareGuarded asks the kind to prepare call into op, turning a panic
// into EINTERNAL: a kind bug triggered by guest input denies the call and
// the kernel stays up.
func prepareGuarded(kind Kind, call *Call, op *Op) (err error) {
	defer catchKind(kind, &err)
	*op, err = kind.Prepare(call)
	return err
}

// runEffect runs a prepared effect, turning a panic into EINTERNAL.
func runEffect(ctx context.Context, kind Kind, f func(context.Context) (*Result, error)) (res *Result, err error) {
	if f == nil {
		return nil, nil
	}
	defer catchKind(kind, &err)
	return f(ctx)
}

// catchKind, deferred, turns a kind's panic into EINTERNAL in *err. (A
// deferred call rather than a closure: it costs a call on every use.)
func catchKind(kind Kind, err *error) {
	if r := recover(); r != nil {
		*err = &Error{Errno: abi.EINTERNAL, Msg: fmt.Sprintf("kind %s panicked: %v", kind.Name(), r)}
	}
}

// DeriveHandle narrows the capability h names as req asks and inserts the
// result into the task's table, through the same pipeline as a call: the
// narrowing is decided first, and the new capability joins the tree only
// once a slot for it is reserved and the derivation is audited.
func (t *Task) DeriveHandle(ctx context.Context, h abi.Handle, req []byte) (abi.Handle, error) {
	const op = "derive"
	c, err := t.table.GetCap(h)
	if err != nil {
		return 0, t.deny(ctx, nil, op, err)
	}
	if err := usable(c); err != nil {
		return 0, t.deny(ctx, c, op, err)
	}
	d, err := narrowGuarded(t.k, c, req)
	if err != nil {
		return 0, t.deny(ctx, c, op, err)
	}
	call := t.newCall(c, op, req)
	defer freeCall(call)
	// A derivation spends no use and no rate token: only calls do.
	prep := Op{Free: true}
	return t.decideDerive(ctx, c, call, &prep, d)
}

// decideDerive runs a derivation through the pipeline, with minting as
// its effect.
func (t *Task) decideDerive(ctx context.Context, c *Cap, call *Call, prep *Op, dv derivation) (abi.Handle, error) {
	op := opName{name: "derive"}
	var d decision
	if err := t.decide(ctx, c, op, call, prep, modeDerive, &d); err != nil {
		return 0, err
	}
	m, err := t.k.mint(dv, t, "", false)
	var e entry
	if err == nil {
		e = entry{cap: m}
	}
	nh, err := t.conclude(ctx, c, op, prep, &d, e, err)
	if err != nil {
		if m != nil {
			t.k.Revoke(m)
		}
		return 0, err
	}
	t.logger.Debug("derived", "parent", c.id, "cap", m.id)
	return nh, nil
}

func narrowGuarded(k *Kernel, c *Cap, req []byte) (d derivation, err error) {
	defer func() {
		if r := recover(); r != nil {
			d, err = derivation{}, &Error{Errno: abi.EINTERNAL, Msg: fmt.Sprintf("kind %s panicked in narrow: %v", c.kind.Name(), r)}
		}
	}()
	return k.narrow(c, req)
}

// RevokeHandle revokes the capability h names and everything derived from
// it. The handle stays in the table (its uses now fail with EREVOKED) until
// dropped.
func (t *Task) RevokeHandle(ctx context.Context, h abi.Handle) error {
	const op = "revoke"
	c, err := t.table.GetCap(h)
	if err != nil {
		return t.deny(ctx, nil, op, err)
	}
	if c.audit {
		if err := t.k.audit(ctx, t, c, op, Allow, nil); err != nil {
			return t.fail(op, err)
		}
	}
	n := t.k.Revoke(c)
	t.logger.Info("revoked", "cap", c.id, "count", n)
	return nil
}

// Drop removes h from the task's table. Dropping a capability does not
// revoke what was derived from it.
func (t *Task) Drop(ctx context.Context, h abi.Handle) error {
	e, err := t.table.remove(h)
	if err != nil {
		return t.deny(ctx, nil, "drop", err)
	}
	if e.cap != nil {
		e.cap.dropped.Store(true)
	}
	return nil
}

// Describe returns a blob holding the JSON description of the capability h
// names: {"id","kind","name","ops","scope","revoked"}.
func (t *Task) Describe(ctx context.Context, h abi.Handle) (abi.Handle, error) {
	const op = "describe"
	c, err := t.table.GetCap(h)
	if err != nil {
		return 0, t.deny(ctx, nil, op, err)
	}
	d := capDescription{
		ID: c.id, Kind: c.kind.Name(), Name: c.name, Ops: slices.Clone(c.reg.info.Ops),
		Scope: scopeJSON(c.scope), Revoked: c.Revoked(),
	}
	bh, err := t.table.InsertBlob(kindapi.NewBlobOwned(mustJSON(d), Label{}))
	if err != nil {
		return 0, t.fail(op, err)
	}
	return bh, nil
}

// CreateBlob makes a blob of data (already copied from the guest), labelled
// with the task's label: whatever a task writes carries its label.
func (t *Task) CreateBlob(ctx context.Context, data []byte) (abi.Handle, error) {
	if len(data) > abi.MaxBlobLen {
		return 0, t.fail("blob_create", Errorf(abi.ELIMIT, "blob of %d bytes exceeds %d", len(data), abi.MaxBlobLen))
	}
	h, err := t.table.InsertBlob(kindapi.NewBlobOwned(data, t.Label()))
	if err != nil {
		return 0, t.fail("blob_create", err)
	}
	return h, nil
}

// ReadBlob copies blob bytes from offset into p. Reading raises the task's
// label to include the blob's (law 6).
func (t *Task) ReadBlob(ctx context.Context, h abi.Handle, offset uint32, p []byte) (int, error) {
	b, err := t.table.GetBlob(h)
	if err != nil {
		return 0, t.deny(ctx, nil, "blob_read", err)
	}
	if err := t.mayHold(b.Label()); err != nil {
		return 0, t.deny(ctx, nil, "blob_read", err)
	}
	if int64(offset) > int64(b.Len()) {
		return 0, t.fail("blob_read", Errorf(abi.EINVAL, "offset %d past the blob's %d bytes", offset, b.Len()))
	}
	t.raise(b.Label())
	n, _ := b.ReadAt(p, int64(offset))
	return n, nil
}

// BlobLen returns the size of the blob h names. Its size is not its
// content: asking does not raise the label.
func (t *Task) BlobLen(ctx context.Context, h abi.Handle) (int, error) {
	b, err := t.table.GetBlob(h)
	if err != nil {
		return 0, t.deny(ctx, nil, "blob_len", err)
	}
	return b.Len(), nil
}

// BlobLabel returns the label of the blob h names, for the host (a test,
// a host API showing what a task holds): no guest call reaches it, and
// asking does not raise the task's label.
func (t *Task) BlobLabel(h abi.Handle) (Label, error) {
	b, err := t.table.GetBlob(h)
	if err != nil {
		return Label{}, err
	}
	return b.Label(), nil
}

// raise joins l into the task's label.
func (t *Task) raise(l Label) {
	if l.IsZero() {
		return
	}
	t.mu.Lock()
	old := t.label
	t.label = t.label.Join(l)
	changed := t.label != old
	t.mu.Unlock()
	if changed {
		t.logger.Debug("label raised", "label", t.label.String())
	}
}

// InputHandle inserts the task's input blob and returns its handle.
func (t *Task) InputHandle(ctx context.Context) (abi.Handle, error) {
	if t.input == nil {
		return 0, t.fail("task_input", Errorf(abi.ENOTFOUND, "the task has no input"))
	}
	h, err := t.hold(t.input)
	if err != nil {
		return 0, t.fail("task_input", err)
	}
	return h, nil
}

// SetResult makes the blob h names the task's result.
func (t *Task) SetResult(ctx context.Context, h abi.Handle) error {
	b, err := t.table.GetBlob(h)
	if err != nil {
		return t.deny(ctx, nil, "task_result", err)
	}
	if t.refuseTaintedResult && len(b.Label().Integ()) > 0 {
		return t.deny(ctx, nil, "task_result", taintErr("the result", b.Label(), "task "+t.id+"'s result (result { accepts_untrusted = false })"))
	}
	t.mu.Lock()
	t.result = b
	t.mu.Unlock()
	return nil
}
