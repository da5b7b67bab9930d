package kernel

import (
	"context"

	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// ApprovalRequest is what an approver is asked: which task, acting for
// whom, wants to do what with which capability.
type ApprovalRequest struct {
	Task      string
	Principal string
	Module    string
	Cap       string
	Kind      string
	Op        string
	// Summary is one line a person can judge, e.g.
	// "charge 612.00 USD to airline.example".
	Summary string
	// Details are the call's arguments as the kind sees them.
	Details map[string]any
}

// Approver decides whether a use that needs a person's yes may go ahead.
// It is the interactive prompt on a terminal, a fixed answer under --approve,
// or "deny" when nobody can be asked.
type Approver interface {
	Approve(ctx context.Context, req ApprovalRequest) (bool, error)
}

// ApproverFunc adapts a function to Approver.
type ApproverFunc func(ctx context.Context, req ApprovalRequest) (bool, error)

// Approve implements Approver.
func (f ApproverFunc) Approve(ctx context.Context, req ApprovalRequest) (bool, error) {
	return f(ctx, req)
}

// DenyAll refuses every approval: the default when nobody can be asked.
var DenyAll = ApproverFunc(func(context.Context, ApprovalRequest) (bool, error) { return false, nil })

// Approve asks the kernel's approver to allow this call, with a summary a
// person can judge and the details of the call. A kind calls it before an
// effect that needs a yes (a payment above its threshold). It returns nil
// on yes and an error matching ErrApproval on no; the decision is audited
// either way.
func (c *Call) Approve(ctx context.Context, summary string, details map[string]any) error {
	switch {
	case c.approve != nil:
		return c.approve(ctx, summary, details)
	case c.task != nil && c.cap != nil:
		return c.task.approve(ctx, c.cap, c.Op, summary, details)
	}
	return Errorf(abi.EAPPROVAL, "approval needed (%s) but no approver is configured", summary)
}

// approve is the kernel side of Call.Approve for a call on c by t.
func (t *Task) approve(ctx context.Context, c *Cap, op, summary string, details map[string]any) error {
	req := ApprovalRequest{
		Task: t.id, Principal: t.principal, Module: t.module,
		Cap: c.id, Kind: c.kind.Name(), Op: op, Summary: summary, Details: details,
	}
	ok, err := t.k.approver.Approve(ctx, req)
	if err != nil {
		err = &Error{Errno: abi.EAPPROVAL, Msg: "approval failed: " + summary, Err: err}
	} else if !ok {
		err = Errorf(abi.EAPPROVAL, "approval refused: %s", summary)
	}
	d := Allow
	if err != nil {
		d = Deny
	}
	if aerr := t.k.audit(ctx, t, c, "approve:"+op, d, err); aerr != nil {
		return aerr
	}
	if err == nil {
		t.logger.Info("approved", "cap", c.id, "op", op, "summary", summary)
	}
	return err
}
