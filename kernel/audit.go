package kernel

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
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
	Label Label
}

// Auditor receives audit events. Record is called before the effect of an
// allowed decision on an audited capability and for every denial (law 8);
// when it fails, the call is denied (fail closed).
type Auditor interface {
	Record(ctx context.Context, ev AuditEvent) error
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
	err := Errorf(abi.EINTERNAL, "%v", reason)
	t.fail(op, err)
	return t.k.audit(ctx, t, nil, op, Deny, err)
}
