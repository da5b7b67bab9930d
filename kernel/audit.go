package kernel

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Decision is what the kernel decided about a call.
type Decision string

const (
	Allow Decision = "allow"
	Deny  Decision = "deny"
	// Outcome records how an allowed effect ended.
	Outcome Decision = "outcome"
)

// AuditEvent is one record of a decision. Audit entries are records, not
// log lines: an Auditor stores them; the logger only mirrors denials.
type AuditEvent struct {
	Time      time.Time
	Task      string
	Principal string
	Module    string
	Cap       string   // capability id, "" when the handle did not resolve
	Ancestry  []string // the capability's derivation chain, root first
	Kind      string
	Op        string // "call:fetch", "derive", "revoke", "drop", "lookup", ...
	Decision  Decision
	Errno     abi.Errno
	Reason    string
	// ArgsDigest is the hex SHA-256 of the call's argument document for
	// the decisions on audited calls (never the arguments themselves:
	// they may hold secrets); "" otherwise.
	ArgsDigest string
	// Label is the task's label at the decision.
	Label kindapi.Label
	// Approval is set on the decisions of a person's approval
	// ("approve:OP"): what they were asked and how it was answered (the
	// same is in Reason, as text).
	Approval *ApprovalDecision
	// Effect is set on the "outcome" entry of a call that changed
	// something outside the kernel (the kind gave an Account): what was
	// done and how it came out. Such an entry is written whether or not
	// the capability is audited.
	Effect *EffectRecord
}

// EffectRecord is what an effect was and how it came out, as the audit
// log records it: one line each, printable, bounded by
// kindapi.MaxAccount.
type EffectRecord struct {
	// Summary is the kind's Account as the calling task wrote it
	// (`POST https://book.example/book {"listing_id":"L1","guest":[spliced 0]}`);
	// what the task wrote is withheld (" [N bytes the task wrote,
	// labelled TAGS]") when the task's label had confidentiality tags.
	Summary string
	// Outcome is the kind's Result.Outcome ("200", "charged 390.00 EUR
	// to airline.example (id ch_1)"), "done" when it gave none, or, for
	// an effect that failed after it may have happened, "may have
	// happened: ERRNO reason".
	Outcome string
}

// ApprovalDecision is a person's answer to an approval request, as the
// audit log records it.
type ApprovalDecision struct {
	Summary string
	Digest  string // the whole effect's (ApprovalRequest.Digest)
	// Answer is AnswerYes, AnswerNo, AnswerRemembered (approve_mints: the
	// same effect approved before in the task), AnswerPlan (an item of
	// a plan the person approved) or AnswerFailed (the approver failed:
	// refused).
	Answer  string
	Channel string
	By      string
	// Plan and PlanItem, for AnswerPlan, say which plan of the task and
	// which of its items (from 1) allowed the effect.
	Plan     int `json:",omitempty"`
	PlanItem int `json:",omitempty"`
}

// Answers of an ApprovalDecision.
const (
	AnswerYes        = "yes"
	AnswerNo         = "no"
	AnswerRemembered = "remembered"
	AnswerFailed     = "failed"
)

// Auditor receives audit events. Record is called before the effect of an
// allowed decision on an audited capability and for every denial (law 8);
// when it fails, the call is denied (fail closed).
type Auditor interface {
	Record(ctx context.Context, ev AuditEvent) error
}

// BatchAuditor is an Auditor that can commit several events as one: all of
// them, in order and next to each other, or none (an error). The kernel
// uses it for an act whose parts nothing outside the kernel sees until
// the act is done: a spawn's allow, the capabilities it passes and its
// outcome are one commit, made before the child runs (spawnChild). An
// Auditor without it gets the events one Record at a time.
type BatchAuditor interface {
	Auditor
	RecordAll(ctx context.Context, evs []AuditEvent) error
}

// RecordAll records evs with a: in one commit when a is a BatchAuditor,
// else one Record after another, stopping at the first failure.
func RecordAll(ctx context.Context, a Auditor, evs []AuditEvent) error {
	if ba, ok := a.(BatchAuditor); ok {
		return ba.RecordAll(ctx, evs)
	}
	for _, ev := range evs {
		if err := a.Record(ctx, ev); err != nil {
			return err
		}
	}
	return nil
}

// auditBatch holds the events recorded under a context of withAuditBatch
// until flushAudit commits them. Law 8 holds because the act's effect
// waits for the flush: a child starts running only after spawnChild
// returns, and spawnChild flushes on every way out. A batch flushed for
// the last time is closed: an event recorded under its context after that
// (a context kept past the act) goes to the auditor at once.
type auditBatch struct {
	mu     sync.Mutex
	evs    []AuditEvent
	closed bool
	lost   bool // a flush failed: what it held is not in the log
}

// failed reports whether a flush of b failed.
func (b *auditBatch) failed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lost
}

type auditBatchKey struct{}

// withAuditBatch returns ctx with a new batch for the events recorded
// under it.
func withAuditBatch(ctx context.Context) (context.Context, *auditBatch) {
	b := &auditBatch{}
	return context.WithValue(ctx, auditBatchKey{}, b), b
}

// add keeps ev in b; false when b is closed (or nil).
func (b *auditBatch) add(ev AuditEvent) bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.evs = append(b.evs, ev)
	return true
}

// flushAudit commits the events b holds, as one when the auditor is a
// BatchAuditor, and closes b when last is set. A failure is an internal
// error, as for one event: the act is refused.
func (k *Kernel) flushAudit(ctx context.Context, t *Task, b *auditBatch, last bool) error {
	b.mu.Lock()
	evs := b.evs
	b.evs = nil
	b.closed = b.closed || last
	b.mu.Unlock()
	if len(evs) == 0 {
		return nil
	}
	if err := RecordAll(ctx, k.auditor, evs); err != nil {
		b.mu.Lock()
		b.lost = true
		b.mu.Unlock()
		return auditFailed(t, err)
	}
	return nil
}

// auditFailed is the error of a call whose audit entry could not be
// written: the call is refused, as an internal error.
func auditFailed(t *Task, err error) error {
	t.logger.Error("audit log failed; denying", "error", err)
	return &kindapi.Error{Errno: abi.EINTERNAL, Msg: "audit log failed", Err: err}
}

// logAuditor mirrors events into a logger. It is the default until a run
// is given a tamper-evident log.
type logAuditor struct{ logger hclog.Logger }

func (a logAuditor) Record(_ context.Context, ev AuditEvent) error {
	args := []any{"task", ev.Task, "cap", ev.Cap, "kind", ev.Kind, "op", ev.Op, "errno", ev.Errno.String()}
	if ev.Reason != "" {
		args = append(args, "reason", ev.Reason)
	}
	switch ev.Decision {
	case Deny:
		a.logger.Debug("audit: deny", args...) // the task's logger already warns
	case Allow:
		a.logger.Info("audit: allow", args...) // only audited capabilities reach here
	default:
		a.logger.Debug("audit: "+string(ev.Decision), args...)
	}
	return nil
}

// RecordElsewhere records a refusal the kernel made for the task ctx
// belongs to (the ctx the kernel gave Module.Run) outside any one host
// call: a child placed on another node whose node was lost, so that its
// calls from then on cannot reach the kernel and none is performed. op
// names what was refused ("forward"); the entry is a deny with EINTERNAL.
func RecordElsewhere(ctx context.Context, op string, reason error) error {
	t := taskFrom(ctx)
	if t == nil {
		return errors.New("kernel: no task in the context")
	}
	err := kindapi.Errorf(abi.EINTERNAL, "%v", reason)
	t.fail(op, err)
	return t.k.audit(ctx, t, nil, op, Deny, err)
}

// audit records ev, filling in the task's identity. A failure to record
// is an internal error: the caller denies.
func (k *Kernel) audit(ctx context.Context, t *Task, c *Cap, op string, d Decision, err error) error {
	return k.record(ctx, t, c, op, d, err, "", "", nil, nil)
}

// auditCall is audit with the digest of the call's arguments.
func (k *Kernel) auditCall(ctx context.Context, t *Task, c *Cap, op string, d Decision, err error, argsDigest string) error {
	return k.record(ctx, t, c, op, d, err, argsDigest, "", nil, nil)
}

// auditEffect is auditCall with what an effect was and how it came out.
func (k *Kernel) auditEffect(ctx context.Context, t *Task, c *Cap, op string, d Decision, err error, argsDigest string, eff *EffectRecord) error {
	return k.record(ctx, t, c, op, d, err, argsDigest, "", nil, eff)
}

// auditText is audit with a text for the entry's reason when there is no
// error: what an approver was shown, or what a grant passed to a child is.
func (k *Kernel) auditText(ctx context.Context, t *Task, c *Cap, op string, d Decision, err error, text string) error {
	return k.record(ctx, t, c, op, d, err, "", text, nil, nil)
}

// auditApproval records an approval's decision: its text and, for the
// run's record, the answer.
func (k *Kernel) auditApproval(ctx context.Context, t *Task, c *Cap, op string, d Decision, err error, text string, a *ApprovalDecision) error {
	return k.record(ctx, t, c, op, d, err, "", text, a, nil)
}

func (k *Kernel) record(ctx context.Context, t *Task, c *Cap, op string, d Decision, err error, argsDigest, text string, a *ApprovalDecision, eff *EffectRecord) error {
	ev := AuditEvent{
		Time:      now(),
		Task:      t.id,
		Principal: t.principal,
		Module:    t.module,
		Op:        op,
		Decision:  d,
		Errno:     kindapi.ErrnoOf(err),
	}
	switch {
	case err != nil && text != "":
		ev.Reason = err.Error() + "\n" + text
	case err != nil:
		ev.Reason = err.Error()
	default:
		ev.Reason = text
	}
	if c != nil {
		ev.Cap, ev.Kind = c.id, c.kind.Name()
		for x := c; x != nil; x = x.parent {
			ev.Ancestry = append([]string{x.id}, ev.Ancestry...)
		}
	}
	ev.Label = t.Label()
	ev.ArgsDigest = argsDigest
	ev.Approval = a
	ev.Effect = eff
	if b, _ := ctx.Value(auditBatchKey{}).(*auditBatch); b.add(ev) {
		return nil // committed by flushAudit, before the act's effect
	}
	if aerr := k.auditor.Record(ctx, ev); aerr != nil {
		return auditFailed(t, aerr)
	}
	return nil
}
