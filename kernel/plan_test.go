package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// planKind pays: every payment needs a yes, and none above 1000 is in its
// scope (a plan cannot widen that).
type planKind struct {
	mu   sync.Mutex
	paid []string
}

type planArgs struct {
	To     string `json:"to"`
	Amount int    `json:"amount"`
}

func (*planKind) Name() string       { return "payk" }
func (*planKind) Info() kindapi.Info { return kindapi.Info{Ops: []string{"pay"}} }
func (*planKind) Grant(kindapi.GrantContext, []byte) (kindapi.Scope, error) {
	return nopScope{}, nil
}
func (*planKind) Narrow(kindapi.Scope, []byte) (kindapi.Scope, error) { return nopScope{}, nil }
func (*planKind) Describe(kindapi.Scope) kindapi.Description          { return kindapi.Description{} }
func (k *planKind) Prepare(c *kindapi.Call) (kindapi.Op, error) {
	var a planArgs
	if err := json.Unmarshal(c.Args, &a); err != nil {
		return kindapi.Op{}, kindapi.Errorf(abi.EINVAL, "bad arguments: %v", err)
	}
	if a.Amount > 1000 {
		return kindapi.Op{}, kindapi.Errorf(abi.EDENIED, "amount %d above the scope's 1000", a.Amount)
	}
	return kindapi.Op{
		NoResult:      true,
		NeedsApproval: "every payment needs a yes",
		Show: func() kindapi.Preview {
			return kindapi.Preview{Summary: fmt.Sprintf("pay %d to %s", a.Amount, a.To),
				Details: []kindapi.Detail{{Name: "to", Value: a.To}, {Name: "amount", Value: fmt.Sprint(a.Amount)}}}
		},
		Effect: func(context.Context) (*kindapi.Result, error) {
			k.mu.Lock()
			k.paid = append(k.paid, fmt.Sprintf("%d to %s", a.Amount, a.To))
			k.mu.Unlock()
			return nil, nil
		},
	}, nil
}

// planFixture is a task holding two pay capabilities, "bills" (plans
// allowed) and "other" (not), whose approver says planYes to plans and
// no to every other question, counting both.
type planFixture struct {
	mu                    sync.Mutex // for the approver, the auditor: calls may race
	kind                  *planKind
	aud                   *recAuditor
	task                  *Task
	bills, other          abi.Handle
	planAsks, effectAsks  int
	planYes               bool
	lastPlan, lastEffects ApprovalRequest
}

func newPlanFixture(t *testing.T, planYes bool) *planFixture {
	t.Helper()
	f := &planFixture{kind: &planKind{}, aud: &recAuditor{}, planYes: planYes}
	ap := ApproverFunc(func(_ context.Context, r ApprovalRequest) (bool, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if r.Op == PlanOp {
			f.planAsks++
			f.lastPlan = r
			return f.planYes, nil
		}
		f.effectAsks++
		f.lastEffects = r
		return false, nil
	})
	k, err := New(Config{Engine: nullEngine{}, Kinds: []kindapi.Kind{f.kind}, Approver: ap, Auditor: lockedAuditor{&f.mu, f.aud}})
	if err != nil {
		t.Fatal(err)
	}
	task := &Task{k: k, id: "t1", principal: "alice", table: NewCapTable(16), names: map[string]*Cap{}, logger: hclog.NewNullLogger()}
	task.resolveBlob = task.table.GetBlob
	f.task = task
	bills, _ := k.newCap(k.kinds["payk"], nopScope{}, "bills", nil, task, true, Constraints{})
	bills.approvePlans = true
	other, _ := k.newCap(k.kinds["payk"], nopScope{}, "other", nil, task, true, Constraints{})
	f.bills, _ = task.table.InsertCap(bills)
	f.other, _ = task.table.InsertCap(other)
	return f
}

func payArgs(to string, amount int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"to":%q,"amount":%d}`, to, amount))
}

func (f *planFixture) submit(t *testing.T, items ...abi.PlanItem) error {
	t.Helper()
	b, err := abi.EncodePlan(abi.Plan{Items: items})
	if err != nil {
		t.Fatal(err)
	}
	return f.task.SubmitPlan(context.Background(), b)
}

func (f *planFixture) pay(h abi.Handle, to string, amount int) abi.Errno {
	_, err := f.task.Invoke(context.Background(), h, "pay", payArgs(to, amount))
	return kindapi.ErrnoOf(err)
}

// approvalsOf are the audited approval decisions of op.
func (f *planFixture) approvalsOf(op string) []AuditEvent {
	var out []AuditEvent
	for _, ev := range f.aud.evs {
		if ev.Op == op && ev.Approval != nil {
			out = append(out, ev)
		}
	}
	return out
}

// TestPlanApproved: one question for the whole plan, showing every item;
// then each item is allowed once, in any order, without a question, and
// audited as allowed by the plan's item; an item used twice, a changed
// amount or recipient, or the same effect on another capability is asked
// about anew (and refused here); unused items expire with the task.
func TestPlanApproved(t *testing.T) {
	f := newPlanFixture(t, true)
	items := []abi.PlanItem{
		{Cap: f.bills, Op: "pay", Args: payArgs("landlord", 900)},
		{Cap: f.bills, Op: "pay", Args: payArgs("power-co", 84)},
		{Cap: f.bills, Op: "pay", Args: payArgs("gym", 30)},
	}
	if err := f.submit(t, items...); err != nil {
		t.Fatalf("SubmitPlan: %v", err)
	}
	if f.planAsks != 1 || f.effectAsks != 0 {
		t.Fatalf("asked %d plan and %d effect questions, want 1 and 0", f.planAsks, f.effectAsks)
	}
	r := f.lastPlan
	if len(r.Plan) != 3 || r.Plan[0].Summary != "pay 900 to landlord" || r.Plan[2].Summary != "pay 30 to gym" || r.Plan[1].CapName != "bills" {
		t.Fatalf("the plan shown: %+v", r.Plan)
	}
	text := r.Text()
	for _, want := range []string{"carry out plan 1: 3 effects", "item 1: pay 900 to landlord", "item 2 to: power-co", "item 3 amount: 30", r.Plan[1].Digest} {
		if !strings.Contains(text, want) {
			t.Errorf("the plan's text lacks %q:\n%s", want, text)
		}
	}
	// The item's digest is the one a single approval of the call shows.
	if err := f.submit(t, abi.PlanItem{Cap: f.other, Op: "pay", Args: payArgs("x", 1)}); kindapi.ErrnoOf(err) != abi.EDENIED {
		t.Fatalf("a plan on a capability without approve_plans: %v, want EDENIED", err)
	}

	// Any order, each once.
	if e := f.pay(f.bills, "power-co", 84); e != abi.ESUCCESS {
		t.Fatalf("item 2: %v", e)
	}
	if e := f.pay(f.bills, "landlord", 900); e != abi.ESUCCESS {
		t.Fatalf("item 1: %v", e)
	}
	if f.effectAsks != 0 {
		t.Fatalf("planned effects asked %d questions", f.effectAsks)
	}
	// Used twice: asked anew, and the question says why.
	if e := f.pay(f.bills, "power-co", 84); e != abi.EAPPROVAL {
		t.Fatalf("item 2 again: %v, want EAPPROVAL", e)
	}
	if f.effectAsks != 1 || !strings.Contains(strings.Join(f.lastEffects.Reasons, "\n"), "plan 1 item 2 was used already") {
		t.Fatalf("item 2 again: %d questions, reasons %q", f.effectAsks, f.lastEffects.Reasons)
	}
	// A changed amount, a changed recipient, another capability: not in
	// the plan.
	for _, c := range []struct {
		h      abi.Handle
		to     string
		amount int
	}{{f.bills, "gym", 31}, {f.bills, "attacker", 30}, {f.other, "gym", 30}} {
		asks := f.effectAsks
		if e := f.pay(c.h, c.to, c.amount); e != abi.EAPPROVAL {
			t.Fatalf("pay %d to %s: %v, want EAPPROVAL", c.amount, c.to, e)
		}
		if f.effectAsks != asks+1 {
			t.Fatalf("pay %d to %s: not asked", c.amount, c.to)
		}
	}
	if !strings.Contains(strings.Join(f.lastEffects.Reasons, "\n"), "not an item of the task's approved plan") {
		t.Errorf("an effect outside the plan: reasons %q", f.lastEffects.Reasons)
	}
	// Outside the scope: refused by the kind whatever the plan says.
	if e := f.pay(f.bills, "landlord", 5000); e != abi.EDENIED {
		t.Fatalf("outside the scope: %v", e)
	}
	if got := strings.Join(f.kind.paid, ", "); got != "84 to power-co, 900 to landlord" {
		t.Fatalf("paid %q", got)
	}

	// Audited: the plan's question and answer, each use by plan and item.
	if evs := f.approvalsOf("approve:plan"); len(evs) != 1 || evs[0].Decision != Allow || evs[0].Approval.Answer != AnswerYes ||
		!strings.Contains(evs[0].Reason, "item 3: pay 30 to gym") {
		t.Fatalf("the plan's audited approvals: %+v", evs)
	}
	var byPlan []string
	for _, ev := range f.approvalsOf("approve:pay") {
		if ev.Approval.Answer == AnswerPlan {
			if !strings.Contains(ev.Reason, fmt.Sprintf("allowed by plan %d item %d", ev.Approval.Plan, ev.Approval.PlanItem)) ||
				ev.Decision != Allow || ev.Approval.Channel != ChannelProgram {
				t.Errorf("an effect allowed by the plan, audited: %+v", ev)
			}
			byPlan = append(byPlan, fmt.Sprintf("%d.%d", ev.Approval.Plan, ev.Approval.PlanItem))
		}
	}
	if strings.Join(byPlan, " ") != "1.2 1.1" {
		t.Errorf("effects audited as allowed by plan items: %v, want 1.2 1.1", byPlan)
	}

	// The task ends: item 3 expires, audited; it can no longer be used.
	f.task.expirePlans(context.Background())
	var expired []string
	for _, ev := range f.aud.evs {
		if ev.Op == "plan:expire" {
			expired = append(expired, ev.Reason)
		}
	}
	if len(expired) != 1 || !strings.Contains(expired[0], "unused items expire: 3 (pay 30 to gym)") {
		t.Errorf("expiry audited as %q", expired)
	}
	if e := f.pay(f.bills, "gym", 30); e != abi.EAPPROVAL {
		t.Errorf("an expired item: %v, want EAPPROVAL", e)
	}
}

// TestPlanRefused: a plan the person refuses allows nothing, and a plan
// never submitted covers nothing; each effect is asked about as before.
func TestPlanRefused(t *testing.T) {
	f := newPlanFixture(t, false)
	if e := f.pay(f.bills, "landlord", 900); e != abi.EAPPROVAL || f.effectAsks != 1 {
		t.Fatalf("no plan: %v, %d questions", e, f.effectAsks)
	}
	err := f.submit(t, abi.PlanItem{Cap: f.bills, Op: "pay", Args: payArgs("landlord", 900)})
	if kindapi.ErrnoOf(err) != abi.EAPPROVAL || f.planAsks != 1 {
		t.Fatalf("a refused plan: %v, %d questions", err, f.planAsks)
	}
	if e := f.pay(f.bills, "landlord", 900); e != abi.EAPPROVAL || f.effectAsks != 2 {
		t.Fatalf("after a refused plan: %v, %d questions", e, f.effectAsks)
	}
	if len(f.kind.paid) != 0 {
		t.Fatalf("paid %q", f.kind.paid)
	}
	if evs := f.approvalsOf("approve:plan"); len(evs) != 1 || evs[0].Decision != Deny || evs[0].Approval.Answer != AnswerNo {
		t.Fatalf("the refused plan, audited: %+v", evs)
	}
	if strings.Contains(f.lastEffects.Text(), "plan") {
		t.Errorf("a question after a refused plan mentions a plan:\n%s", f.lastEffects.Text())
	}
}

// TestPlanChecked: a plan is refused whole, before anyone is asked, when
// an item would be refused as a call: outside the kind's scope, on a
// capability without approve_plans, a bad handle, an unknown operation,
// arguments that do not decode; and it is bounded.
func TestPlanChecked(t *testing.T) {
	f := newPlanFixture(t, true)
	many := make([]abi.PlanItem, abi.MaxPlanItems+1)
	for i := range many {
		many[i] = abi.PlanItem{Cap: f.bills, Op: "pay", Args: payArgs("x", i)}
	}
	for _, tc := range []struct {
		name  string
		items []abi.PlanItem
		want  abi.Errno
	}{
		{"outside the scope", []abi.PlanItem{{Cap: f.bills, Op: "pay", Args: payArgs("landlord", 900)}, {Cap: f.bills, Op: "pay", Args: payArgs("x", 5000)}}, abi.EDENIED},
		{"no approve_plans", []abi.PlanItem{{Cap: f.other, Op: "pay", Args: payArgs("x", 1)}}, abi.EDENIED},
		{"bad handle", []abi.PlanItem{{Cap: 999, Op: "pay", Args: payArgs("x", 1)}}, abi.EBADHANDLE},
		{"unknown op", []abi.PlanItem{{Cap: f.bills, Op: "steal", Args: payArgs("x", 1)}}, abi.ENOTSUP},
		{"bad arguments", []abi.PlanItem{{Cap: f.bills, Op: "pay", Args: json.RawMessage(`{"amount":"x"}`)}}, abi.EINVAL},
		{"no items", nil, abi.EINVAL},
		{"too many items", many, abi.ELIMIT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := f.submit(t, tc.items...); kindapi.ErrnoOf(err) != tc.want {
				t.Fatalf("SubmitPlan = %v, want %v", err, tc.want)
			}
			if f.planAsks != 0 {
				t.Fatalf("the person was asked about a plan the kernel refuses")
			}
		})
	}
	for _, bad := range []string{`{"items":[{"cap":1,"op":"pay","args":{}}],"extra":1}`, `not json`, `{"items":[{"cap":1,"op":"pay","args":{"a":1,"a":2}}]}`} {
		if err := f.task.SubmitPlan(context.Background(), []byte(bad)); kindapi.ErrnoOf(err) != abi.EINVAL {
			t.Errorf("SubmitPlan(%s) = %v, want EINVAL", bad, err)
		}
	}
}

// TestPlanRevoked: revoking an item's capability leaves its items
// unusable (EREVOKED before any approval).
func TestPlanRevoked(t *testing.T) {
	f := newPlanFixture(t, true)
	if err := f.submit(t, abi.PlanItem{Cap: f.bills, Op: "pay", Args: payArgs("landlord", 900)}); err != nil {
		t.Fatal(err)
	}
	if err := f.task.RevokeHandle(context.Background(), f.bills); err != nil {
		t.Fatal(err)
	}
	if e := f.pay(f.bills, "landlord", 900); e != abi.EREVOKED {
		t.Fatalf("a planned effect on a revoked capability: %v, want EREVOKED", e)
	}
	if len(f.kind.paid) != 0 {
		t.Fatalf("paid %q", f.kind.paid)
	}
}

// TestPlanLimit: a task submits at most MaxPlans plans.
func TestPlanLimit(t *testing.T) {
	f := newPlanFixture(t, true)
	for i := range abi.MaxPlans {
		if err := f.submit(t, abi.PlanItem{Cap: f.bills, Op: "pay", Args: payArgs("x", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.submit(t, abi.PlanItem{Cap: f.bills, Op: "pay", Args: payArgs("x", 1)}); kindapi.ErrnoOf(err) != abi.ELIMIT {
		t.Fatalf("plan %d: %v, want ELIMIT", abi.MaxPlans+1, err)
	}
}

// TestPlanWholeEffect: a plan's item covers exactly its whole effect: an
// effect whose detail is the same for as much as a person is shown (the
// text cuts it) but differs after is not the item, and is asked about.
func TestPlanWholeEffect(t *testing.T) {
	f := newPlanFixture(t, true)
	long := strings.Repeat("x", 4096)
	if err := f.submit(t, abi.PlanItem{Cap: f.bills, Op: "pay", Args: payArgs(long+"a", 10)}); err != nil {
		t.Fatal(err)
	}
	if text := f.lastPlan.Text(); !strings.Contains(text, "[cut: the whole") {
		t.Fatalf("the test expects the plan's text to cut the recipient:\n%s", text)
	}
	if e := f.pay(f.bills, long+"b", 10); e != abi.EAPPROVAL || f.effectAsks != 1 {
		t.Fatalf("an effect differing past the cut: %v, %d questions; want EAPPROVAL, asked", e, f.effectAsks)
	}
	if e := f.pay(f.bills, long+"a", 10); e != abi.ESUCCESS || f.effectAsks != 1 {
		t.Fatalf("the planned effect: %v, %d questions", e, f.effectAsks)
	}
	if len(f.kind.paid) != 1 {
		t.Fatalf("paid %d", len(f.kind.paid))
	}
}

// lockedAuditor records under a lock.
type lockedAuditor struct {
	mu *sync.Mutex
	a  *recAuditor
}

func (l lockedAuditor) Record(ctx context.Context, ev AuditEvent) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.a.Record(ctx, ev)
}

// TestPlanItemRace: calls racing for one item: exactly one is allowed by
// it, the others are asked about (and refused). Run with -race.
func TestPlanItemRace(t *testing.T) {
	f := newPlanFixture(t, true)
	if err := f.submit(t, abi.PlanItem{Cap: f.bills, Op: "pay", Args: payArgs("landlord", 900)}); err != nil {
		t.Fatal(err)
	}
	const n = 16
	errnos := make(chan abi.Errno, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errnos <- f.pay(f.bills, "landlord", 900)
		}()
	}
	wg.Wait()
	close(errnos)
	ok := 0
	for e := range errnos {
		switch e {
		case abi.ESUCCESS:
			ok++
		case abi.EAPPROVAL:
		default:
			t.Errorf("a racing call: %v", e)
		}
	}
	if ok != 1 || len(f.kind.paid) != 1 || f.effectAsks != n-1 {
		t.Fatalf("%d calls allowed, %d paid, %d asked; want 1, 1, %d", ok, len(f.kind.paid), f.effectAsks, n-1)
	}
}
