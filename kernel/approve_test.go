package kernel

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// approveKind's act needs a yes, unless quiet; a quiet act returns a blob.
type approveKind struct {
	effects int
	quiet   bool
}

func (*approveKind) Name() string       { return "appr" }
func (*approveKind) Info() kindapi.Info { return kindapi.Info{Ops: []string{"act"}} }
func (*approveKind) Grant(kindapi.GrantContext, []byte) (kindapi.Scope, error) {
	return nopScope{}, nil
}
func (*approveKind) Narrow(kindapi.Scope, []byte) (kindapi.Scope, error) { return nopScope{}, nil }
func (*approveKind) Describe(kindapi.Scope) kindapi.Description          { return kindapi.Description{} }
func (k *approveKind) Prepare(c *kindapi.Call) (kindapi.Op, error) {
	if k.quiet {
		return kindapi.Op{Effect: func(context.Context) (*kindapi.Result, error) {
			k.effects++
			return &kindapi.Result{Data: []byte("done")}, nil
		}}, nil
	}
	return kindapi.Op{
		NoResult:      true,
		NeedsApproval: "the thing always needs a yes",
		Show: func() kindapi.Preview {
			return kindapi.Preview{Summary: "do the thing", Details: []kindapi.Detail{{Name: "amount", Value: "3"}}}
		},
		Effect: func(context.Context) (*kindapi.Result, error) {
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
			k, err := New(Config{Engine: nullEngine{}, Kinds: []kindapi.Kind{kind}, Approver: tc.approver, Auditor: aud})
			if err != nil {
				t.Fatal(err)
			}
			task := &Task{k: k, id: "t1", principal: "p", table: NewCapTable(8), names: map[string]*Cap{}, logger: hclog.NewNullLogger()}
			task.resolveBlob = task.table.GetBlob
			c, _ := k.newCap(k.kinds["appr"], nopScope{}, "a", nil, task, false, Constraints{})
			h, _ := task.table.InsertCap(c)
			_, err = task.Invoke(context.Background(), h, "act", nil)
			if got := kindapi.ErrnoOf(err); got != tc.want {
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
	k, err := New(Config{Engine: nullEngine{}, Kinds: []kindapi.Kind{kind}, Auditor: aud, Approver: ApproverFunc(func(context.Context, ApprovalRequest) (bool, error) { return true, nil })})
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
	if kindapi.ErrnoOf(err) != abi.EINTERNAL {
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

func (k *mintKind) Prepare(c *kindapi.Call) (kindapi.Op, error) {
	payee := string(c.Args)
	return kindapi.Op{
		NoResult:      true,
		NeedsApproval: "every payment needs a yes",
		Show: func() kindapi.Preview {
			return kindapi.Preview{Summary: "pay 1,200.00 to " + payee, Details: []kindapi.Detail{{Name: "payee", Value: payee}}}
		},
		Effect: func(context.Context) (*kindapi.Result, error) { k.effects++; return nil, nil },
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
		k, err := New(Config{Engine: nullEngine{}, Kinds: []kindapi.Kind{kind}, Auditor: aud,
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

// TestApprovalTextCut: a part too long to show is cut in the text, marked
// with its whole size and digest; the request carries it whole, and its
// digest is the whole effect's.
func TestApprovalTextCut(t *testing.T) {
	long := strings.Repeat("a", 600) + "99"
	eff := kindapi.Preview{Summary: "post it", Details: []kindapi.Detail{{Name: "body", Value: long}}}
	r := ApprovalRequest{Task: "t1", Principal: "p", Summary: eff.Summary, Details: eff.Details, Digest: EffectDigest("fetch", eff)}
	text := r.Text()
	sum := sha256.Sum256([]byte(long))
	if !strings.Contains(text, fmt.Sprintf("[cut: the whole 602 bytes have digest sha256:%x]", sum)) || strings.Contains(text, "99") {
		t.Errorf("a cut part is shown as:\n%s", text)
	}
	if !strings.Contains(text, "  effect: "+r.Digest+"\n") {
		t.Errorf("the text does not end with the effect's digest:\n%s", text)
	}
	other := kindapi.Preview{Summary: "post it", Details: []kindapi.Detail{{Name: "body", Value: strings.Repeat("a", 600) + "10"}}}
	if EffectDigest("fetch", other) == r.Digest {
		t.Error("two effects that differ past what is shown have the same digest")
	}
	if EffectDigest("fetch", eff) != r.Digest || EffectDigest("charge", eff) == r.Digest {
		t.Error("the digest is not a function of the operation and the whole effect")
	}
}
