package kernel

import (
	"context"
	"errors"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

type approveKind struct{ effects int }

func (*approveKind) Name() string                              { return "appr" }
func (*approveKind) Ops() []string                             { return []string{"act"} }
func (*approveKind) Grant(GrantContext, []byte) (Scope, error) { return nopScope{}, nil }
func (*approveKind) Narrow(Scope, []byte) (Scope, error)       { return nopScope{}, nil }
func (k *approveKind) Invoke(ctx context.Context, c *Call) (*Result, error) {
	if err := c.Approve(ctx, "do the thing", map[string]any{"amount": 3}); err != nil {
		return nil, err
	}
	k.effects++
	return nil, nil
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
			if r.Summary != "do the thing" || r.Principal != "p" || r.Op != "act" {
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
			c, _ := k.newCap(kind, nopScope{}, "a", nil, task, false, Constraints{})
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
		})
	}
}
