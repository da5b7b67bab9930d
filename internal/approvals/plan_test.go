package approvals

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// TestPlanApproval: a plan's request is kept whole, its items and the
// details that show them, and answered once like any other; the Approver
// hands the kernel the yes.
func TestPlanApproval(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	items := []kernel.PlanItem{
		{Cap: "c1", CapName: "card", Kind: "pay", Op: "charge", Summary: "charge 84.20 USD to power.example", Digest: "sha256:aa",
			Details: []kindapi.Detail{{Name: "amount", Value: "84.20"}}},
		{Cap: "c1", CapName: "card", Kind: "pay", Op: "charge", Summary: "charge 60.00 USD to gym.example", Digest: "sha256:bb",
			Details: []kindapi.Detail{{Name: "amount", Value: "60.00"}}},
	}
	req := kernel.ApprovalRequest{Task: "t1", Principal: "alice", Cap: "c1", CapName: "plan 1", Kind: kernel.PlanOp, Op: kernel.PlanOp,
		Summary: "carry out plan 1: 2 effects, each at most once", Plan: items, Digest: "sha256:cc",
		Details: []kindapi.Detail{{Name: "item 1", Value: items[0].Summary}, {Name: "item 1 amount", Value: "84.20"},
			{Name: "item 2", Value: items[1].Summary}, {Name: "item 2 amount", Value: "60.00"}}}
	got := make(chan kernel.Answer, 1)
	ap := &Approver{Store: s, Waiter: "test", Timeout: time.Hour, Asked: func(ctx context.Context, a Approval) {
		if !reflect.DeepEqual(a.Request, req) {
			t.Errorf("the pending plan\n%+v\nwant\n%+v", a.Request, req)
		}
		stored, err := s.Get(ctx, a.ID)
		if err != nil || !reflect.DeepEqual(stored.Request, req) {
			t.Errorf("the stored plan (%v)\n%+v\nwant\n%+v", err, stored.Request, req)
		}
		go func() {
			if _, err := s.Answer(context.Background(), a.ID, kernel.Answer{Yes: true, Channel: kernel.ChannelCLI, By: "alice"}, ""); err != nil {
				t.Error(err)
			}
		}()
	}}
	go func() {
		ans, err := ap.Approve(ctx, req)
		if err != nil {
			t.Error(err)
		}
		got <- ans
	}()
	if ans := <-got; !ans.Yes || ans.Channel != kernel.ChannelCLI || ans.By != "alice" {
		t.Errorf("the plan's answer: %+v", ans)
	}
}
