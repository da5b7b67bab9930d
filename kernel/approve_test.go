package kernel

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// approveKind's act needs a yes, unless quiet; a quiet act returns a blob.
type approveKind struct {
	effects int
	quiet   bool
}

func (*approveKind) Name() string                              { return "appr" }
func (*approveKind) Info() Info                                { return Info{Ops: []string{"act"}} }
func (*approveKind) Grant(GrantContext, []byte) (Scope, error) { return nopScope{}, nil }
func (*approveKind) Narrow(Scope, []byte) (Scope, error)       { return nopScope{}, nil }
func (*approveKind) Describe(Scope) Description                { return Description{} }
func (k *approveKind) Prepare(c *Call) (Op, error) {
	if k.quiet {
		return Op{Effect: func(context.Context) (*Result, error) {
			k.effects++
			return &Result{Data: []byte("done")}, nil
		}}, nil
	}
	return Op{
		NoResult:      true,
		NeedsApproval: "the thing always needs a yes",
		Show: func() Effect {
			return Effect{Summary: "do the thing", Details: []Detail{{Name: "amount", Value: "3"}}}
		},
		Effect: func(context.Context) (*Result, error) {
			k.effects++
			return nil, nil
		},
	}, nil
}

type recAuditor struct{ evs []AuditEvent }

func (a *recAuditor) Record(_ context.Context, ev AuditEvent) error {
	a.evs = append(a.evs, ev)
	return nil
}

func TestApproval(t *testing.T) {
	for _, tc := range []struct {
		name     string
		approver Approver
		want     abi.Errno
		effects  int
	}{
		{"yes", ApproverFunc(func(_ context.Context, r ApprovalRequest) (bool, error) {
			if r.Summary != "do the thing" || r.Principal != "p" || r.Op != "act" || len(r.Details) != 1 || r.Details[0].Value != "3" ||
				len(r.Reasons) != 1 || r.Reasons[0] != "the thing always needs a yes" || r.CapName != "a" {
				t.Errorf("approval request %+v", r)
			}
			return true, nil
		}), abi.ESUCCESS, 1},
		{"no", DenyAll, abi.EAPPROVAL, 0},
		{"default denies", nil, abi.EAPPROVAL, 0},
		{"approver fails", ApproverFunc(func(context.Context, ApprovalRequest) (bool, error) {
			return true, errors.New("terminal closed")
		}), abi.EAPPROVAL, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kind := &approveKind{}
			aud := &recAuditor{}
			k, err := New(Config{Engine: nullEngine{}, Kinds: []Kind{kind}, Approver: tc.approver, Auditor: aud})
			if err != nil {
				t.Fatal(err)
			}
			task := &Task{k: k, id: "t1", principal: "p", table: NewCapTable(8), names: map[string]*Cap{}, logger: hclog.NewNullLogger()}
			task.resolveBlob = task.table.GetBlob
			c, _ := k.newCap(k.kinds["appr"], nopScope{}, "a", nil, task, false, Constraints{})
			h, _ := task.table.InsertCap(c)
			_, err = task.Invoke(context.Background(), h, "act", nil)
			if got := ErrnoOf(err); got != tc.want {
				t.Fatalf("Invoke = %v (%v), want %v", got, err, tc.want)
			}
			if kind.effects != tc.effects {
				t.Fatalf("effects = %d, want %d", kind.effects, tc.effects)
			}
			var approvals int
			for _, ev := range aud.evs {
				if ev.Op == "approve:act" {
					approvals++
				}
			}
			if approvals != 1 {
				t.Fatalf("%d approval decisions audited, want 1: %+v", approvals, aud.evs)
			}
			for _, ev := range aud.evs {
				if ev.Op == "approve:act" && !strings.Contains(ev.Reason, "amount: 3") {
					t.Fatalf("the audit entry does not carry what the approver was shown: %q", ev.Reason)
				}
			}
		})
	}
}

// failingAuditor refuses to record allow decisions.
type failingAuditor struct{ recAuditor }

func (a *failingAuditor) Record(ctx context.Context, ev AuditEvent) error {
	if ev.Decision == Allow {
		return errors.New("disk full")
	}
	return a.recAuditor.Record(ctx, ev)
}

// TestAuditFailureStopsTheEffect: the pipeline's write-ahead step. When
// the log cannot record "allow", the call fails (EINTERNAL) before its
// effect, and what it reserved (the use, the rate token, the table slot)
// is given back.
func TestAuditFailureStopsTheEffect(t *testing.T) {
	kind := &approveKind{quiet: true}
	aud := &failingAuditor{}
	k, err := New(Config{Engine: nullEngine{}, Kinds: []Kind{kind}, Auditor: aud, Approver: ApproverFunc(func(context.Context, ApprovalRequest) (bool, error) { return true, nil })})
	if err != nil {
		t.Fatal(err)
	}
	task := &Task{k: k, id: "t1", principal: "p", table: NewCapTable(8), names: map[string]*Cap{}, logger: hclog.NewNullLogger()}
	task.resolveBlob = task.table.GetBlob
	c := &Cap{kind: kind, reg: k.kinds["appr"], scope: nopScope{}, name: "a", holder: task, audit: true,
		allow: newAllowance(Allowance{MaxUses: 1}), rate: newBucket(Rate{N: 1, Per: time.Hour}, time.Now())}
	if _, err := k.link(c); err != nil {
		t.Fatal(err)
	}
	h, _ := task.table.InsertCap(c)
	before := task.table.Len()
	_, err = task.Invoke(context.Background(), h, "act", nil)
	if ErrnoOf(err) != abi.EINTERNAL {
		t.Fatalf("Invoke with a failing log = %v, want EINTERNAL", err)
	}
	if kind.effects != 0 {
		t.Fatalf("the effect ran %d times with no allow in the log", kind.effects)
	}
	if u, _ := c.Usage(); u.Uses != 0 {
		t.Errorf("the refused call used %d of max_uses", u.Uses)
	}
	if c.rate.tokens != 1 {
		t.Errorf("the refused call spent a rate token: %v left", c.rate.tokens)
	}
	if got := task.table.Len(); got != before {
		t.Errorf("the table holds %d entries, %d before the call", got, before)
	}
}

// mintKind's act shows its arguments as the payee, and needs a yes.
type mintKind struct{ approveKind }

func (k *mintKind) Prepare(c *Call) (Op, error) {
	payee := string(c.Args)
	return Op{
		NoResult:      true,
		NeedsApproval: "every payment needs a yes",
		Show: func() Effect {
			return Effect{Summary: "pay 1,200.00 to " + payee, Details: []Detail{{Name: "payee", Value: payee}}}
		},
		Effect: func(context.Context) (*Result, error) { k.effects++; return nil, nil },
	}, nil
}

// TestApproveMints: with approve_mints, a call a person approved needs no
// second question for the same effect in the same task; another payee
// still asks, and without approve_mints every call asks.
func TestApproveMints(t *testing.T) {
	for _, mints := range []bool{true, false} {
		kind := &mintKind{}
		asked := 0
		aud := &recAuditor{}
		k, err := New(Config{Engine: nullEngine{}, Kinds: []Kind{kind}, Auditor: aud,
			Approver: ApproverFunc(func(context.Context, ApprovalRequest) (bool, error) { asked++; return true, nil })})
		if err != nil {
			t.Fatal(err)
		}
		task := &Task{k: k, id: "t1", principal: "p", table: NewCapTable(8), names: map[string]*Cap{}, logger: hclog.NewNullLogger()}
		task.resolveBlob = task.table.GetBlob
		c, _ := k.newCap(k.kinds["appr"], nopScope{}, "card", nil, task, false, Constraints{})
		c.approveMints = mints
		h, _ := task.table.InsertCap(c)
		for i, payee := range []string{"GB29NWBK60161331926819", "GB29NWBK60161331926819", "ATTACKER", "GB29NWBK60161331926819"} {
			if _, err := task.Invoke(context.Background(), h, "act", []byte(payee)); err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
		}
		want := 4
		if mints {
			want = 2 // the first payee once, the attacker once
		}
		if asked != want || kind.effects != 4 {
			t.Errorf("approve_mints %v: asked %d times for 4 calls, want %d (effects %d)", mints, asked, want, kind.effects)
		}
		again := 0
		for _, ev := range aud.evs {
			if ev.Op == "approve:act" && strings.Contains(ev.Reason, "approved before in this task") {
				again++
			}
		}
		if mints && again != 2 {
			t.Errorf("%d audited reuses of an approval, want 2", again)
		}
	}
}
