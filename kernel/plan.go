package kernel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox"
)

// Plans: open-ended delegation ("do the tasks on my TODO list") without a
// question per step. A task submits the effects it intends (plan_submit),
// each the exact call it will make; the kernel prepares each as it would
// the call (the kind's own checks of the arguments), computes the effect
// a person would be shown and its digest, and asks the person once,
// showing every item whole. On yes the task holds the plan: a later call
// that would need a yes is allowed without a question when its effect is
// exactly one of the plan's unused items (the same capability and the
// same effect digest), and that item is then used. Anything else is asked
// about (or refused) as before.
//
// A plan replaces only the yes. Each effect still goes through the whole
// pipeline when it is made (scope, flow, when, rate, max_uses, budget,
// fence, audit), so a plan never widens a capability. Plans are opt-in per
// capability (approve_plans), belong to the task that submitted them (a
// child has none of its parent's), and end with it: unused items expire,
// audited. Revoking an item's capability makes its item unusable (the call
// is EREVOKED before any approval).

// plans is what a task holds of its approved plans.
type plans struct {
	mu        sync.Mutex
	submitted int     // plans submitted, approved or not; protected by mu
	list      []*plan // approved plans; protected by mu
}

// plan is one approved plan.
type plan struct {
	n       int    // its number in the task, from 1
	digest  string // the digest of the plan as the person was shown it
	channel string // how the yes came
	by      string // who gave it
	items   []planItem
}

// planItem is one effect of a plan.
type planItem struct {
	cap     *Cap
	op      string
	summary string
	digest  string // EffectDigest of the effect
	used    bool   // protected by plans.mu
}

// PlanItem is one item of a plan as an approver is shown it: the
// capability, the operation and the effect, as a single approval of that
// call would show it, with its digest.
type PlanItem struct {
	Cap     string           `json:"cap"`
	CapName string           `json:"cap_name"`
	Kind    string           `json:"kind"`
	Op      string           `json:"op"`
	Summary string           `json:"summary"`
	Details []kindapi.Detail `json:"details"`
	Digest  string           `json:"digest"`
}

// PlanOp is the operation of a plan's approval request (ApprovalRequest.Op
// and Kind).
const PlanOp = "plan"

// AnswerPlan is the Answer of an ApprovalDecision for an effect a plan
// covered: no question, the person approved the plan.
const AnswerPlan = "plan"

// planSubmitCall: plan_submit asks a person to approve a plan once.
var planSubmitCall = HostCall{
	Name:   abi.PlanSubmitName,
	Params: []sandbox.Param{in("req_ptr", abi.MaxArgLen), length("req_len")},
	Errnos: []ErrnoCase{
		{abi.EINVAL, "the request does not decode, has no items, or an item's arguments do not decode."},
		{abi.ELIMIT, "`req_len` > 1 MiB, more than 64 items, or the task already submitted 8 plans."},
		{abi.EBADHANDLE, "an item's `cap` is not in the caller's table."},
		{abi.EWRONGTYPE, "an item's `cap` is not a capability."},
		{abi.EREVOKED, "an item's capability or an ancestor was revoked."},
		{abi.ENOTSUP, "an item's kind has no operation `op`."},
		{abi.EDENIED, "an item's capability does not allow plans (`approve_plans`), or its kind refuses the " +
			"item's arguments (outside the scope)."},
		{abi.EAPPROVAL, "the person said no, or nobody could be asked: the task holds no plan, and each effect " +
			"is asked about as before."},
		{abi.EFAULT, "the request is out of bounds."},
	},
	fn: hostPlanSubmit,
}

func hostPlanSubmit(ctx context.Context, t *Task, mem sandbox.Memory, p []uint64) abi.Errno {
	req, e := readGuest(mem, u32(p[0]), u32(p[1]), abi.MaxArgLen)
	if e != abi.ESUCCESS {
		return faulted(t, abi.PlanSubmitName, e)
	}
	return kindapi.ErrnoOf(t.SubmitPlan(ctx, req))
}

// SubmitPlan asks the kernel's approver, once, about every effect of the
// plan req (abi.Plan): nil when the person said yes, and the task then
// holds the plan until it ends; an error matching kindapi.ErrApproval
// when they said no. An item the kernel refuses (a capability without
// approve_plans, arguments outside the scope) refuses the whole plan
// before anyone is asked.
func (t *Task) SubmitPlan(ctx context.Context, req []byte) error {
	const op = "plan"
	pl, err := abi.DecodePlan(req)
	if err != nil {
		errno := abi.EINVAL
		if errors.Is(err, abi.ErrTooLarge) {
			errno = abi.ELIMIT
		}
		return t.fail(op, kindapi.Errorf(errno, "the plan does not decode: %v", err))
	}
	switch n := len(pl.Items); {
	case n == 0:
		return t.fail(op, kindapi.Errorf(abi.EINVAL, "the plan has no items"))
	case n > abi.MaxPlanItems:
		return t.deny(ctx, nil, op, kindapi.Errorf(abi.ELIMIT, "the plan has %d items, more than %d", n, abi.MaxPlanItems))
	}
	t.plans.mu.Lock()
	if t.plans.submitted >= abi.MaxPlans {
		t.plans.mu.Unlock()
		return t.deny(ctx, nil, op, kindapi.Errorf(abi.ELIMIT, "the task already submitted %d plans", abi.MaxPlans))
	}
	t.plans.submitted++
	num := t.plans.submitted
	t.plans.mu.Unlock()

	items := make([]planItem, len(pl.Items))
	shown := make([]PlanItem, len(pl.Items))
	for i, it := range pl.Items {
		c, pi, err := t.preparePlanItem(it)
		if err != nil {
			err = fmt.Errorf("item %d: %w", i+1, err)
			if c == nil {
				return t.refuse(ctx, nil, op, err)
			}
			return t.refuse(ctx, c, op, err)
		}
		items[i] = planItem{cap: c, op: pi.Op, summary: pi.Summary, digest: pi.Digest}
		shown[i] = pi
	}
	areq := t.planRequest(num, shown)
	text := areq.Text()
	dec := &ApprovalDecision{Summary: areq.Summary, Digest: areq.Digest}
	ans, err := t.k.approver.Approve(ctx, areq)
	failed := err != nil
	if err != nil {
		err = &kindapi.Error{Errno: abi.EAPPROVAL, Msg: "approval of the plan failed", Err: err}
	} else if !ans.Yes {
		err = kindapi.Errorf(abi.EAPPROVAL, "plan %d refused: %s", num, areq.Summary)
	}
	d := Allow
	text += answerLine(ans, failed)
	dec.Channel, dec.By = ans.Channel, ans.By
	switch {
	case err == nil:
		dec.Answer = AnswerYes
	case failed:
		d, dec.Answer = Deny, AnswerFailed
	default:
		d, dec.Answer = Deny, AnswerNo
	}
	if aerr := t.k.auditApproval(ctx, t, nil, "approve:"+PlanOp, d, err, text, dec); aerr != nil {
		return t.fail(op, aerr)
	}
	if err != nil {
		return t.deny(ctx, nil, op, err)
	}
	t.plans.mu.Lock()
	t.plans.list = append(t.plans.list, &plan{n: num, digest: areq.Digest, channel: ans.Channel, by: ans.By, items: items})
	t.plans.mu.Unlock()
	t.logger.Info("plan approved", "plan", num, "items", len(items), "channel", ans.Channel, "by", ans.By)
	return nil
}

// preparePlanItem checks one item as cap_call would check the call up to
// the kind's Prepare, and returns what a person is shown of it. The
// returned capability is set when the item named one.
func (t *Task) preparePlanItem(it abi.PlanItem) (*Cap, PlanItem, error) {
	c, err := t.table.GetCap(it.Cap)
	if err != nil {
		return nil, PlanItem{}, err
	}
	if err := usable(c); err != nil {
		return c, PlanItem{}, err
	}
	if !c.allowsPlans() {
		return c, PlanItem{}, kindapi.Errorf(abi.EDENIED, "capability %s does not allow plans (approve_plans)", c.displayName())
	}
	kop, ok := findOp(c.reg.info.Ops, []byte(it.Op))
	if !ok || kop == kindapi.OpSpawn {
		return c, PlanItem{}, kindapi.Errorf(abi.ENOTSUP, "kind %s has no operation %q", c.kind.Name(), it.Op)
	}
	call := t.newCall(c, kop, it.Args)
	defer freeCall(call)
	var prep kindapi.Op
	if err := prepareGuarded(c.kind, call, &prep); err != nil {
		return c, PlanItem{}, err
	}
	eff := showDefault(kop, it.Args)
	if prep.Show != nil {
		eff = prep.Show()
	}
	return c, PlanItem{Cap: c.id, CapName: c.displayName(), Kind: c.kind.Name(), Op: kop,
		Summary: eff.Summary, Details: eff.Details, Digest: EffectDigest(kop, eff)}, nil
}

// planRequest is the approval request of plan num: every item whole, in
// Plan and, for approvers that show only the details, flattened into
// Details ("item N", then each of the item's details as "item N name").
// Its digest covers all of it.
func (t *Task) planRequest(num int, items []PlanItem) ApprovalRequest {
	var eff kindapi.Preview
	var caps []string
	for _, it := range items {
		if !slices.Contains(caps, it.Cap) {
			caps = append(caps, it.Cap)
		}
	}
	eff.Summary = fmt.Sprintf("carry out plan %d: %d effects, each at most once", num, len(items))
	if len(items) == 1 {
		eff.Summary = fmt.Sprintf("carry out plan %d: 1 effect, at most once", num)
	}
	for i, it := range items {
		item := fmt.Sprintf("item %d", i+1)
		eff.Details = append(eff.Details, kindapi.Detail{Name: item,
			Value: fmt.Sprintf("%s, with %s %q (%s), effect %s", it.Summary, it.Kind, it.CapName, it.Cap, it.Digest)})
		for _, d := range it.Details {
			eff.Details = append(eff.Details, kindapi.Detail{Name: item + " " + d.Name, Value: d.Value})
		}
	}
	return ApprovalRequest{
		Task: t.id, Principal: t.principal, Module: t.module,
		Cap: strings.Join(caps, ", "), CapName: fmt.Sprintf("plan %d", num), Kind: PlanOp, Op: PlanOp,
		Summary: eff.Summary, Details: eff.Details, Plan: items,
		Reasons: []string{"one yes allows each item below once, exactly as shown; any other effect is asked about " +
			"(or refused) as before, and every item still passes its capability's own checks"},
		Digest: EffectDigest(PlanOp, eff),
	}
}

// allowsPlans reports whether effects on c may be plan items
// (approve_plans on c or an ancestor).
func (c *Cap) allowsPlans() bool {
	for x := c; x != nil; x = x.parent {
		if x.approvePlans {
			return true
		}
	}
	return false
}

// usePlanItem finds an unused item of an approved plan whose effect on c
// has the digest, and uses it: the caller then allows the effect without
// asking. ok is false when there is none; then used names the plan
// items with that effect already used, if any, for the question asked
// instead.
func (t *Task) usePlanItem(c *Cap, digest string) (p *plan, n int, ok bool, used string) {
	t.plans.mu.Lock()
	defer t.plans.mu.Unlock()
	var spent []string
	for _, pl := range t.plans.list {
		for i := range pl.items {
			it := &pl.items[i]
			if it.cap != c || it.digest != digest {
				continue
			}
			if it.used {
				spent = append(spent, fmt.Sprintf("plan %d item %d", pl.n, i+1))
				continue
			}
			it.used = true
			return pl, i + 1, true, ""
		}
	}
	return nil, 0, false, strings.Join(spent, ", ")
}

// hasPlans reports whether the task holds an approved plan.
func (t *Task) hasPlans() bool {
	t.plans.mu.Lock()
	defer t.plans.mu.Unlock()
	return len(t.plans.list) > 0
}

// expirePlans ends the task's plans when it ends: each unused item
// expires, and the audit log says which (an outcome of the plan's
// approval).
func (t *Task) expirePlans(ctx context.Context) {
	t.plans.mu.Lock()
	var lines []string
	for _, pl := range t.plans.list {
		var unused []string
		for i := range pl.items {
			if it := &pl.items[i]; !it.used {
				it.used = true
				unused = append(unused, fmt.Sprintf("%d (%s)", i+1, kindapi.Printable(it.summary)))
			}
		}
		if len(unused) > 0 {
			lines = append(lines, fmt.Sprintf("plan %d (%s): the task ended; unused items expire: %s",
				pl.n, pl.digest, strings.Join(unused, "; ")))
		}
	}
	t.plans.mu.Unlock()
	for _, l := range lines {
		if err := t.k.auditText(context.WithoutCancel(ctx), t, nil, "plan:expire", Outcome, nil, l); err != nil {
			t.logger.Error("auditing a plan's expiry failed", "error", err)
		}
	}
}
