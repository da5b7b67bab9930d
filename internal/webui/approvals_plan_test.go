package webui

import (
	"context"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/approvals"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// TestUIApprovalPlan: a plan's approval (kernel.PlanOp) shows every item
// on its page, each item's every detail, in order.
func TestUIApprovalPlan(t *testing.T) {
	dir := twoRuns(t)
	st, err := approvals.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	items := []kernel.PlanItem{
		{Cap: "c1", CapName: "card", Kind: "pay", Op: "charge", Summary: "charge 84.20 USD to power.example", Digest: "sha256:aa",
			Details: []kindapi.Detail{{Name: "payee", Value: "power.example"}, {Name: "amount", Value: "84.20"}}},
		{Cap: "c1", CapName: "card", Kind: "pay", Op: "charge", Summary: "charge 60.00 USD to gym.example", Digest: "sha256:bb",
			Details: []kindapi.Detail{{Name: "payee", Value: "gym.example"}, {Name: "amount", Value: "60.00"}}},
	}
	var details []kindapi.Detail
	for i, it := range items {
		name := []string{"item 1", "item 2"}[i]
		details = append(details, kindapi.Detail{Name: name, Value: it.Summary + `, with pay "card" (c1), effect ` + it.Digest})
		for _, d := range it.Details {
			details = append(details, kindapi.Detail{Name: name + " " + d.Name, Value: d.Value})
		}
	}
	a, err := st.Add(context.Background(), approvals.Approval{Run: runA, Waiter: "mandate run bills.hcl", Expires: time.Now().Add(time.Hour),
		Request: kernel.ApprovalRequest{Task: "t1", Principal: "alice", Module: "m", Cap: "c1", CapName: "plan 1",
			Kind: kernel.PlanOp, Op: kernel.PlanOp, Summary: "carry out plan 1: 2 effects, each at most once",
			Details: details, Plan: items, Digest: "sha256:cc"}})
	if err != nil {
		t.Fatal(err)
	}
	u := startUI(t, Options{StateDir: dir})
	var v approvalView
	u.getJSON("/api/approvals/"+a.ID, &v)
	want := []string{"item 1", "item 1 payee", "item 1 amount", "item 2", "item 2 payee", "item 2 amount"}
	if len(v.Details) != len(want) {
		t.Fatalf("the plan's page shows %d details, want %d: %+v", len(v.Details), len(want), v.Details)
	}
	for i, d := range v.Details {
		if d.Name != want[i] || d.Value != details[i].Value {
			t.Errorf("detail %d: %s = %q, want %s = %q", i, d.Name, d.Value, want[i], details[i].Value)
		}
	}
	if v.Summary != "carry out plan 1: 2 effects, each at most once" || v.Op != kernel.PlanOp {
		t.Errorf("the plan's view: %q, op %q", v.Summary, v.Op)
	}
}
