package kernel

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// ApprovalRequest is what an approver is asked: which task, acting for
// whom, wants to do what with which capability, and why a person is asked.
// The effect is what the kernel will do if the answer is yes, as the kind
// prepared it (method and URL, payee and amount...), never a paraphrase.
type ApprovalRequest struct {
	Task      string
	Principal string
	Module    string
	Cap       string
	// CapName is the manifest name of the capability or its root grant.
	CapName string
	Kind    string
	Op      string
	// Summary is one line a person can judge, e.g.
	// "charge 612.00 USD to airline.example".
	Summary string
	// Details are the effect's parts (method, url, body, payee, amount,
	// currency...), bounded and printable.
	Details []Detail
	// Reasons say why a person is asked: the kind's own threshold
	// ("amount above approve_above 500.00 USD") and each approve_when that
	// matched.
	Reasons []string
}

// Text is the request as a person reads it: the same text the audit log
// records of the decision. Every part is escaped (Printable), so a guest
// cannot write to the approver's terminal.
func (r ApprovalRequest) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "task %s, acting for %s, asks to %s\n", Printable(r.Task), Printable(r.Principal), Printable(r.Summary))
	fmt.Fprintf(&b, "  capability: %s %q (%s)\n", Printable(r.Kind), Printable(r.CapName), Printable(r.Cap))
	for _, d := range r.Details {
		fmt.Fprintf(&b, "  %s: %s\n", Printable(d.Name), Printable(d.Value))
	}
	for _, why := range r.Reasons {
		fmt.Fprintf(&b, "  because: %s\n", Printable(why))
	}
	return b.String()
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

// showDefault is what an approver sees of a call whose kind shows nothing
// of its own.
func showDefault(op string, args []byte) Effect {
	return Effect{Summary: fmt.Sprintf("%s (%d bytes of arguments)", op, len(args)),
		Details: []Detail{{Name: "arguments", Value: string(args)}}}
}

// approve asks the kernel's approver about a call on c by t, showing the
// prepared effect, and audits the question and the answer with the text
// the approver saw. It returns nil on yes and an error matching
// ErrApproval on no.
func (t *Task) approve(ctx context.Context, c *Cap, op string, eff Effect, reasons []string) error {
	req := ApprovalRequest{
		Task: t.id, Principal: t.principal, Module: t.module,
		Cap: c.id, CapName: c.displayName(), Kind: c.kind.Name(), Op: op,
		Summary: eff.Summary, Details: eff.Details, Reasons: reasons,
	}
	text := req.Text()
	key, mints := approvalKey(c, op, eff)
	if mints && c.wasApproved(key) {
		text += "  approved before in this task (approve_mints): the same effect, no second question\n"
		if aerr := t.k.auditText(ctx, t, c, "approve:"+op, Allow, nil, text); aerr != nil {
			return aerr
		}
		t.logger.Info("approved before", "cap", c.id, "op", op, "summary", eff.Summary)
		return nil
	}
	ok, err := t.k.approver.Approve(ctx, req)
	if err != nil {
		err = &Error{Errno: abi.EAPPROVAL, Msg: "approval failed: " + eff.Summary, Err: err}
	} else if !ok {
		err = Errorf(abi.EAPPROVAL, "approval refused: %s", eff.Summary)
	}
	d := Allow
	if err != nil {
		d = Deny
	}
	if aerr := t.k.auditText(ctx, t, c, "approve:"+op, d, err, text); aerr != nil {
		return aerr
	}
	if err == nil {
		t.logger.Info("approved", "cap", c.id, "op", op, "summary", eff.Summary)
		if mints {
			c.remember(key)
		}
	}
	return err
}

// maxApproved bounds the approvals one capability remembers.
const maxApproved = 64

// approvalKey is the digest of what a person is shown of a call on c
// (its operation, summary and every detail), and whether approvals on c
// are remembered (approve_mints on c or an ancestor).
func approvalKey(c *Cap, op string, eff Effect) (key [32]byte, mints bool) {
	for x := c; x != nil; x = x.parent {
		if x.approveMints {
			mints = true
			break
		}
	}
	if !mints {
		return key, false
	}
	h := sha256.New()
	for _, s := range []string{op, eff.Summary} {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	for _, d := range eff.Details {
		fmt.Fprintf(h, "%d:%s%d:%s", len(d.Name), d.Name, len(d.Value), d.Value)
	}
	copy(key[:], h.Sum(nil))
	return key, true
}

func (c *Cap) wasApproved(key [32]byte) bool {
	c.approvedMu.Lock()
	defer c.approvedMu.Unlock()
	_, ok := c.approved[key]
	return ok
}

// remember records an approved effect; past maxApproved one remembered
// effect (any) is forgotten, so a person may be asked again, never the
// reverse.
func (c *Cap) remember(key [32]byte) {
	c.approvedMu.Lock()
	defer c.approvedMu.Unlock()
	if c.approved == nil {
		c.approved = map[[32]byte]struct{}{}
	}
	if len(c.approved) >= maxApproved {
		for k := range c.approved {
			delete(c.approved, k)
			break
		}
	}
	c.approved[key] = struct{}{}
}
