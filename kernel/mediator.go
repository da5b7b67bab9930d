package kernel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// The mediator: the one pipeline (decide, conclude) every operation a guest
// asks for goes through once its arguments were copied out of guest memory
// (hostcall.go), and how a refusal is recorded (deny, fail, refuse). The
// operations themselves are in files of their own: cap_call in call.go,
// cap_derive in derive.go, revoke, drop and describe in revoke.go, the
// blob calls in blobcall.go, task_spawn in spawn.go; what a call holds
// while it is decided in reserve.go. Each resolves handles in the task's
// own table only and returns an *Error whose errno the guest sees. Every
// denial is audited and recorded as the task's last error.

// deny records a refused operation: audit first, then the task's last
// error and the log line. It returns the error to hand back (an audit
// failure replaces it).
func (t *Task) deny(ctx context.Context, c *Cap, op string, err error) error {
	if aerr := t.k.audit(ctx, t, c, op, Deny, err); aerr != nil {
		err = aerr
	}
	t.mu.Lock()
	t.lastErr = op + ": " + err.Error()
	t.lastDenial = kindapi.ErrnoOf(err)
	t.denials++
	t.mu.Unlock()
	args := []any{"op", op, "errno", kindapi.ErrnoOf(err).String(), "error", err}
	if c != nil {
		args = append(args, "cap", c.id, "kind", c.kind.Name())
	}
	t.logger.Warn("denied", args...)
	return err
}

// Refuse records that the host refused an act of t (c may be nil): a
// denial of t, audited, counted and shown like a refusal of a guest's
// call, e.g. a session's tool call whose sinks cannot take what the
// session has seen. It returns err, or the audit's failure instead.
func (t *Task) Refuse(ctx context.Context, c *Cap, op string, err error) error {
	return t.deny(ctx, c, op, err)
}

// fail records a failed effect (not a denial) as the task's last error.
func (t *Task) fail(op string, err error) error {
	t.mu.Lock()
	t.lastErr = op + ": " + err.Error()
	t.mu.Unlock()
	t.logger.Debug("call failed", "op", op, "errno", kindapi.ErrnoOf(err).String(), "error", err)
	return err
}

// usable checks the state of a capability before any use.
func usable(c *Cap) error {
	if c.Revoked() {
		return kindapi.Errorf(abi.EREVOKED, "capability %s was revoked", c.id)
	}
	return nil
}

// newCall takes a Call from the pool for a call on c.
func (t *Task) newCall(c *Cap, op string, args []byte) *kindapi.Call {
	call := callPool.Get().(*kindapi.Call)
	var scope kindapi.Scope
	if c != nil {
		scope = c.scope
	}
	call.Init(op, args, scope, t.info, t.logger, t.resolveBlob, t.labelOf)
	call.SetReveal(t.raiseOf)
	return call
}

func freeCall(call *kindapi.Call) {
	*call = kindapi.Call{}
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
//	-> fence (Config.Fence: may this host still act for the run?)
//	-> audit allow (durable, when the capability is audited)
//
// and returns nil when the caller may perform the effect; conclude then
// audits the outcome, commits the reservations and installs the result. A
// refusal at any step of decide releases what was reserved and records
// the denial: no effect, no debit, no token, no handle, and no "allow" in
// the log. They are two functions rather than one taking the effect as a
// closure so that a call allocates nothing on the common path.
func (t *Task) decide(ctx context.Context, c *Cap, op opName, call *kindapi.Call, prep *kindapi.Op, mode callMode, d *decision) error {
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
	if mode != modeDerive && c != nil && c.chain&chainConstraints != 0 {
		need, err := checkConstraints(ctx, t, c, call, prep, &d.r)
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
	// Fence: last, so that an approval that took long is not performed
	// by a host that lost the run meanwhile.
	if f := t.k.fence; f != nil {
		if err := f(); err != nil {
			return refuse(err) // EINTERNAL unless err is a *kindapi.Error
		}
	}
	// Audit allow, durable before the effect (law 8).
	if audited(c) {
		sum := sha256.Sum256(call.Args)
		d.digest = hex.EncodeToString(sum[:])
		if err := t.k.auditCall(ctx, t, c, op.String(), Allow, nil, d.digest); err != nil {
			d.r.release(t.table)
			return t.fail(op.String(), err)
		}
	}
	return nil
}

// audited reports whether a decision on c is audited: when c is, and
// always for the host's own acts (a child it starts: no capability).
func audited(c *Cap) bool { return c == nil || c.audit }

// decision is a call that passed decide: what it holds until conclude.
type decision struct {
	r       reservation
	digest  string // of the arguments, for the audit entries
	outcome string // the effect's Result.Outcome
	// batch, when set, holds the act's entries so far (spawnChild):
	// conclude commits them with the outcome, before the effect counts.
	batch *auditBatch
}

// effectRecord is what the audit log records of an effect with an
// account: the kind's account as the task wrote it (withheld when the
// task's label has confidentiality tags: the log is read by operators
// and holds no labelled data), and how it came out.
func (t *Task) effectRecord(c *Cap, account func() kindapi.Account, outcome string, err error) *EffectRecord {
	a, aerr := accountGuarded(c, account)
	if aerr != nil {
		t.logger.Error("the kind's account of an effect failed", "error", aerr)
		a = kindapi.Account{Action: "(the kind's account failed: " + aerr.Error() + ")"}
	}
	sum := a.Action
	if a.Written != "" {
		if conf := t.Label().Conf(); len(conf) > 0 {
			sum += fmt.Sprintf(" [%d bytes the task wrote, labelled %s]", len(a.Written), strings.Join(conf, ","))
		} else {
			sum += a.Written
		}
	}
	switch {
	case err != nil && outcome != "":
		outcome += " (then failed: " + kindapi.ErrnoOf(err).String() + " " + err.Error() + ")"
	case err != nil:
		outcome = "may have happened: " + kindapi.ErrnoOf(err).String() + " " + err.Error()
	case outcome == "":
		outcome = "done"
	}
	return &EffectRecord{
		Summary: kindapi.PrintableMax(sum, kindapi.MaxAccount),
		Outcome: kindapi.PrintableMax(outcome, kindapi.MaxAccount),
	}
}

// accountGuarded asks the kind for its account of an effect, turning a
// panic into an error.
func accountGuarded(c *Cap, f func() kindapi.Account) (a kindapi.Account, err error) {
	if c != nil {
		defer catchKind(c.kind, &err)
	} else {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panicked: %v", r)
			}
		}()
	}
	return f(), nil
}

// conclude ends a decided call whose effect returned e and err: the outcome
// is audited, the reservations are committed (or given back when the effect
// did nothing: kindapi.NotPerformed, Result.Free) and e is installed in the
// reserved slot.
func (t *Task) conclude(ctx context.Context, c *Cap, op opName, prep *kindapi.Op, d *decision, e entry, err error) (abi.Handle, error) {
	// The outcome entry: on an audited capability, and for every call
	// that changed something outside the kernel (Op.Account), what it
	// did, when it ran or may have.
	if prep.Account != nil && (err == nil || kindapi.Performed(err)) {
		eff := t.effectRecord(c, prep.Account, d.outcome, err)
		if aerr := t.k.auditEffect(ctx, t, c, op.String(), Outcome, err, d.digest, eff); aerr != nil && err == nil {
			err = aerr
		}
	} else if audited(c) {
		if aerr := t.k.auditCall(ctx, t, c, op.String(), Outcome, err, d.digest); aerr != nil && err == nil {
			err = aerr
		}
	}
	if d.batch != nil {
		// The act's entries, allow included: the effect counts only once
		// they are in the log, and is undone when they cannot be.
		if aerr := t.k.flushAudit(ctx, t, d.batch, false); aerr != nil && err == nil {
			err = kindapi.NotPerformed(aerr)
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

// callPool recycles Calls: a kind must not keep a Call, or its Args, past
// its Effect (see Kind.Prepare).
var callPool = sync.Pool{New: func() any { return new(kindapi.Call) }}

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
func prepareGuarded(kind kindapi.Kind, call *kindapi.Call, op *kindapi.Op) (err error) {
	defer catchKind(kind, &err)
	*op, err = kind.Prepare(call)
	return err
}

// runEffect runs a prepared effect, turning a panic into EINTERNAL.
func runEffect(ctx context.Context, kind kindapi.Kind, f func(context.Context) (*kindapi.Result, error)) (res *kindapi.Result, err error) {
	if f == nil {
		return nil, nil
	}
	defer catchKind(kind, &err)
	return f(ctx)
}

// catchKind, deferred, turns a kind's panic into EINTERNAL in *err. (A
// deferred call rather than a closure: it costs a call on every use.)
func catchKind(kind kindapi.Kind, err *error) {
	if r := recover(); r != nil {
		*err = &kindapi.Error{Errno: abi.EINTERNAL, Msg: fmt.Sprintf("kind %s panicked: %v", kind.Name(), r)}
	}
}
