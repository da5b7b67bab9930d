package host

import (
	"context"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/runstore"
)

// Auditor is a run's kernel.Auditor: it writes every event to the audit
// log first (an event that cannot be written is refused, and the kernel
// denies), mirrors allowed decisions on audited capabilities into the
// run's logger, as the kernel's default auditor does (denials are already
// logged by the task), keeps the run's denials, flows, approvals and
// effects for the run store, bounded, and tells the run's watchers.
type Auditor struct {
	log    kernel.Auditor
	logger hclog.Logger
	notify func(Event) // nil: nobody watches

	mu        sync.Mutex
	denials   []runstore.Denial   // at most runstore.MaxDenials
	flows     []runstore.Flow     // at most runstore.MaxFlows
	approvals []runstore.Approval // at most runstore.MaxApprovals
	effects   []runstore.Effect   // at most runstore.MaxEffects
	dropped   struct{ denials, flows, effects int }
}

// NewAuditor records a run's decisions to log (the run's view of the audit
// log, audit.Log.ForRun), logging allowed ones to logger.
func NewAuditor(log kernel.Auditor, logger hclog.Logger) *Auditor {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &Auditor{log: log, logger: logger}
}

// Record implements kernel.Auditor.
func (a *Auditor) Record(ctx context.Context, ev kernel.AuditEvent) error {
	if err := a.log.Record(ctx, ev); err != nil {
		return err
	}
	a.recorded(ev)
	return nil
}

// RecordAll implements kernel.BatchAuditor: one commit when the log can
// (audit.Log's), else one Record after another.
func (a *Auditor) RecordAll(ctx context.Context, evs []kernel.AuditEvent) error {
	if err := kernel.RecordAll(ctx, a.log, evs); err != nil {
		return err
	}
	for _, ev := range evs {
		a.recorded(ev)
	}
	return nil
}

// recorded logs an allowed event and keeps what the run store keeps of it.
func (a *Auditor) recorded(ev kernel.AuditEvent) {
	if ev.Decision == kernel.Allow {
		a.logger.Info("audit: allow", "task", ev.Task, "cap", ev.Cap, "kind", ev.Kind, "op", ev.Op)
	}
	a.keep(ev)
}

// Kept returns the denials and flows kept so far, and how many more there
// were than the run store keeps.
func (a *Auditor) Kept() (denials []runstore.Denial, flows []runstore.Flow, deniedMore, flowedMore int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]runstore.Denial(nil), a.denials...), append([]runstore.Flow(nil), a.flows...),
		a.dropped.denials, a.dropped.flows
}

// Approvals returns the approvals asked so far and their answers (at most
// runstore.MaxApprovals).
func (a *Auditor) Approvals() []runstore.Approval {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]runstore.Approval(nil), a.approvals...)
}

// Effects returns the effects the run's calls had, as the audit log
// records them (kernel.EffectRecord), in order, and how many more there
// were than the run store keeps.
func (a *Auditor) Effects() (effects []runstore.Effect, dropped int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]runstore.Effect(nil), a.effects...), a.dropped.effects
}

// keep notes a denial, and a decision where labelled data met a sink: an
// EFLOW refusal, a declassification, or an audited call by a labelled task.
func (a *Auditor) keep(ev kernel.AuditEvent) {
	errno := ""
	if ev.Errno != abi.ESUCCESS {
		errno = ev.Errno.String()
	}
	denied := ev.Decision == kernel.Deny
	flowed := ev.Errno == abi.EFLOW || ev.Kind == "declassify" || ev.Decision == kernel.Allow && !ev.Label.IsZero()
	a.mu.Lock()
	if ap := ev.Approval; ap != nil && len(a.approvals) < runstore.MaxApprovals {
		a.approvals = append(a.approvals, runstore.Approval{Time: ev.Time, Task: ev.Task, Cap: ev.Cap, Kind: ev.Kind, Op: ev.Op,
			Summary: ap.Summary, Digest: ap.Digest, Answer: ap.Answer, Channel: ap.Channel, By: ap.By})
	}
	if eff := ev.Effect; eff != nil {
		if len(a.effects) < runstore.MaxEffects {
			a.effects = append(a.effects, runstore.Effect{Time: ev.Time, Task: ev.Task, Cap: ev.Cap, Kind: ev.Kind, Op: ev.Op,
				Summary: eff.Summary, Outcome: eff.Outcome, Errno: errno})
		} else {
			a.dropped.effects++
		}
	}
	if denied {
		if len(a.denials) < runstore.MaxDenials {
			a.denials = append(a.denials, runstore.Denial{Time: ev.Time, Task: ev.Task, Principal: ev.Principal, Cap: ev.Cap,
				Kind: ev.Kind, Op: ev.Op, Errno: errno, Reason: ev.Reason, Label: ev.Label})
		} else {
			a.dropped.denials++
		}
	}
	if flowed {
		if len(a.flows) < runstore.MaxFlows {
			a.flows = append(a.flows, runstore.Flow{Time: ev.Time, Task: ev.Task, Cap: ev.Cap, Kind: ev.Kind, Op: ev.Op,
				Decision: string(ev.Decision), Errno: errno, Label: ev.Label})
		} else {
			a.dropped.flows++
		}
	}
	notify := a.notify
	a.mu.Unlock()
	if notify == nil {
		return
	}
	e := Event{Time: ev.Time, Task: ev.Task, Cap: ev.Cap, CapKind: ev.Kind, Op: ev.Op, Errno: errno, Reason: ev.Reason, Label: ev.Label}
	switch {
	case denied:
		e.Kind = EventDenied
	case ev.Decision == kernel.Allow || ev.Decision == kernel.Outcome:
		e.Kind = EventCalled
		e.Decision = string(ev.Decision)
	}
	if e.Kind != "" {
		notify(e)
	}
	if flowed {
		e.Kind, e.Decision = EventFlowed, string(ev.Decision)
		notify(e)
	}
}
