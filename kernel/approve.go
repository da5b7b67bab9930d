package kernel

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// ApprovalRequest is what an approver is asked: which task, acting for
// whom, wants to do what with which capability, and why a person is asked.
// The effect is what the kernel will do if the answer is yes, as the kind
// prepared it (method and URL, payee and amount...), never a paraphrase.
type ApprovalRequest struct {
	Task      string `json:"task"`
	Principal string `json:"principal"`
	Module    string `json:"module"`
	Cap       string `json:"cap"`
	// CapName is the manifest name of the capability or its root grant.
	CapName string `json:"cap_name"`
	Kind    string `json:"kind"`
	Op      string `json:"op"`
	// Summary is one line a person can judge, e.g.
	// "charge 612.00 USD to airline.example".
	Summary string `json:"summary"`
	// Details are the effect's parts (method, url, every header, the
	// whole body; payee, amount, currency, key; model and prompt...),
	// each whole: Text cuts what is too long to read at a glance, and
	// says so with the part's size and digest.
	Details []kindapi.Detail `json:"details"`
	// Reasons say why a person is asked: the kind's own threshold
	// ("amount above approve_above 500.00 USD") and each approve_when that
	// matched.
	Reasons []string `json:"reasons,omitempty"`
	// Digest identifies the whole effect ("sha256:..." over the
	// operation, the summary and every detail, uncut): a yes is to this
	// digest, and a remembered yes (approve_mints) covers only an effect
	// with the same one.
	Digest string `json:"digest"`
	// Plan, for a plan's request (Op PlanOp), is its items, each as a
	// single approval of it would show it; Details show them too.
	Plan []PlanItem `json:"plan,omitempty"`
}

// Text is the request as a person reads it: the same text the audit log
// records of the decision. Every part is escaped (Printable), so a guest
// cannot write to the approver's terminal; a part too long to show is cut,
// marked with its size and digest (the whole is in Details).
func (r ApprovalRequest) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "task %s, acting for %s, asks to %s\n", kindapi.Printable(r.Task), kindapi.Printable(r.Principal), kindapi.Printable(r.Summary))
	fmt.Fprintf(&b, "  capability: %s %q (%s)\n", kindapi.Printable(r.Kind), kindapi.Printable(r.CapName), kindapi.Printable(r.Cap))
	for _, d := range r.Details {
		v, cut := kindapi.PrintableCut(d.Value)
		if cut {
			sum := sha256.Sum256([]byte(d.Value))
			v += fmt.Sprintf(" [cut: the whole %d bytes have digest sha256:%x]", len(d.Value), sum)
		}
		fmt.Fprintf(&b, "  %s: %s\n", kindapi.Printable(d.Name), v)
	}
	for _, why := range r.Reasons {
		fmt.Fprintf(&b, "  because: %s\n", kindapi.Printable(why))
	}
	if r.Digest != "" {
		fmt.Fprintf(&b, "  effect: %s\n", r.Digest)
	}
	return b.String()
}

// Approval channels: how an answer reached the kernel (Answer.Channel).
const (
	ChannelTerminal = "terminal" // the person, at the run's terminal
	ChannelFlag     = "flag"     // a fixed answer given when the run started (--approve yes/no)
	ChannelWeb      = "web"      // the person, on mandate ui's approvals page
	ChannelCLI      = "cli"      // the person, with mandate approvals yes/no
	ChannelClient   = "client"   // an MCP client's form (its yes may be the model's own)
	ChannelTimeout  = "timeout"  // nobody answered in time: refused
	ChannelNone     = "none"     // nobody can be asked: refused
	ChannelProgram  = "program"  // a function of the program embedding the kernel
)

// Answer is an approver's answer: yes or no, through which channel, and
// whatever identifies who gave it (a terminal's user, the web page's
// client, the CLI's user and terminal). The audit log records all three.
type Answer struct {
	Yes     bool   `json:"yes"`
	Channel string `json:"channel"`
	By      string `json:"by,omitempty"`
}

// Approver decides whether a use that needs a person's yes may go ahead.
// It is the interactive prompt on a terminal, a fixed answer under
// --approve, the pending approvals a person answers in mandate ui or with
// mandate approvals, or "deny" when nobody can be asked.
type Approver interface {
	Approve(ctx context.Context, req ApprovalRequest) (Answer, error)
}

// ApproverFunc adapts a function of the embedding program to Approver:
// its answers are on ChannelProgram.
type ApproverFunc func(ctx context.Context, req ApprovalRequest) (bool, error)

// Approve implements Approver.
func (f ApproverFunc) Approve(ctx context.Context, req ApprovalRequest) (Answer, error) {
	yes, err := f(ctx, req)
	return Answer{Yes: yes, Channel: ChannelProgram}, err
}

// DenyAll refuses every approval: the default when nobody can be asked.
// A constant, so no linked package can make the default say yes.
const DenyAll denyAll = 0

type denyAll int

// Approve implements Approver: no.
func (denyAll) Approve(context.Context, ApprovalRequest) (Answer, error) {
	return Answer{Channel: ChannelNone, By: "nobody can be asked"}, nil
}

// EffectDigest is the digest of a whole effect: the operation, the
// summary and every detail, each length-prefixed, uncut.
func EffectDigest(op string, eff kindapi.Preview) string {
	h := sha256.New()
	for _, s := range []string{op, eff.Summary} {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	for _, d := range eff.Details {
		fmt.Fprintf(h, "%d:%s%d:%s", len(d.Name), d.Name, len(d.Value), d.Value)
	}
	return fmt.Sprintf("sha256:%x", h.Sum(nil))
}

// showDefault is what an approver sees of a call whose kind shows nothing
// of its own.
func showDefault(op string, args []byte) kindapi.Preview {
	return kindapi.Preview{Summary: fmt.Sprintf("%s (%d bytes of arguments)", op, len(args)),
		Details: []kindapi.Detail{{Name: "arguments", Value: string(args)}}}
}

// approve asks the kernel's approver about a call on c by t, showing the
// prepared effect, and audits the question and the answer with the text
// the approver saw. It returns nil on yes and an error matching
// kindapi.ErrApproval on no.
func (t *Task) approve(ctx context.Context, c *Cap, op string, eff kindapi.Preview, reasons []string) error {
	req := ApprovalRequest{
		Task: t.id, Principal: t.principal, Module: t.module,
		Cap: c.id, CapName: c.displayName(), Kind: c.kind.Name(), Op: op,
		Summary: eff.Summary, Details: eff.Details, Reasons: reasons,
		Digest: EffectDigest(op, eff),
	}
	text := req.Text()
	mints := c.mintsApprovals()
	dec := &ApprovalDecision{Summary: eff.Summary, Digest: req.Digest}
	if mints && c.wasApproved(req.Digest) {
		text += "  approved before in this task (approve_mints): the same effect, no second question\n"
		dec.Answer = AnswerRemembered
		if aerr := t.k.auditApproval(ctx, t, c, "approve:"+op, Allow, nil, text, dec); aerr != nil {
			return aerr
		}
		t.logger.Info("approved before", "cap", c.id, "op", op, "summary", eff.Summary)
		return nil
	}
	if pl, n, ok, used := t.usePlanItem(c, req.Digest); ok {
		text += fmt.Sprintf("  allowed by plan %d item %d (the plan %s, approved by channel %s%s): no question of its own\n",
			pl.n, n, pl.digest, kindapi.Printable(pl.channel), byText(pl.by))
		dec.Answer, dec.Channel, dec.By = AnswerPlan, pl.channel, pl.by
		dec.Plan, dec.PlanItem = pl.n, n
		if aerr := t.k.auditApproval(ctx, t, c, "approve:"+op, Allow, nil, text, dec); aerr != nil {
			return aerr
		}
		t.logger.Info("allowed by plan", "cap", c.id, "op", op, "plan", pl.n, "item", n, "summary", eff.Summary)
		return nil
	} else if used != "" {
		req.Reasons = append(req.Reasons, "the same effect was planned, and "+used+" was used already")
		text = req.Text()
	} else if t.hasPlans() {
		req.Reasons = append(req.Reasons, "not an item of the task's approved plan")
		text = req.Text()
	}
	ans, err := t.k.approver.Approve(ctx, req)
	failed := err != nil
	if err != nil {
		err = &kindapi.Error{Errno: abi.EAPPROVAL, Msg: "approval failed: " + eff.Summary, Err: err}
	} else if !ans.Yes {
		err = kindapi.Errorf(abi.EAPPROVAL, "approval refused: %s", eff.Summary)
	}
	d := Allow
	if err != nil {
		d = Deny
	}
	text += answerLine(ans, failed)
	dec.Channel, dec.By = ans.Channel, ans.By
	switch {
	case err == nil:
		dec.Answer = AnswerYes
	case failed:
		dec.Answer = AnswerFailed
	default:
		dec.Answer = AnswerNo
	}
	if aerr := t.k.auditApproval(ctx, t, c, "approve:"+op, d, err, text, dec); aerr != nil {
		return aerr
	}
	if err == nil {
		t.logger.Info("approved", "cap", c.id, "op", op, "summary", eff.Summary, "channel", ans.Channel, "by", ans.By)
		if mints {
			c.remember(req.Digest)
		}
	}
	return err
}

// answerLine is what the audit log records of an answer: yes or no, the
// channel and who answered; failed: the approver gave no answer.
func answerLine(a Answer, failed bool) string {
	if failed {
		return "  answered: none (the approver failed)\n"
	}
	what := "no"
	if a.Yes {
		what = "yes"
	}
	ch := a.Channel
	if ch == "" {
		ch = "unnamed"
	}
	line := "  answered: " + what + ", by channel " + kindapi.Printable(ch)
	if a.By != "" {
		line += " (" + kindapi.Printable(a.By) + ")"
	}
	return line + "\n"
}

// byText is ", by WHO" when who is known.
func byText(who string) string {
	if who == "" {
		return ""
	}
	return " (" + kindapi.Printable(who) + ")"
}

// maxApproved bounds the approvals one capability remembers.
const maxApproved = 64

// mintsApprovals reports whether approvals on c are remembered
// (approve_mints on c or an ancestor).
func (c *Cap) mintsApprovals() bool {
	for x := c; x != nil; x = x.parent {
		if x.approveMints {
			return true
		}
	}
	return false
}

func (c *Cap) wasApproved(key string) bool {
	c.approvedMu.Lock()
	defer c.approvedMu.Unlock()
	_, ok := c.approved[key]
	return ok
}

// remember records an approved effect; past maxApproved one remembered
// effect (any) is forgotten, so a person may be asked again, never the
// reverse.
func (c *Cap) remember(key string) {
	c.approvedMu.Lock()
	defer c.approvedMu.Unlock()
	if c.approved == nil {
		c.approved = map[string]struct{}{}
	}
	if len(c.approved) >= maxApproved {
		for k := range c.approved {
			delete(c.approved, k)
			break
		}
	}
	c.approved[key] = struct{}{}
}
