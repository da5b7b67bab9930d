package pay_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mandatevm/mandate/caps/pay"
	"github.com/mandatevm/mandate/caps/pay/paytest"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// TestGuestPlan runs testdata/guests/plan-pay, built from source against
// the real Go SDK, on the test engine (go test -tags wasmtime for the
// other): a plan of two charges approved once is carried out in the
// other order without a question; the same charge again is the pay
// kind's free replay of its key (no new charge, so no question: the plan's
// item is not needed); a changed amount and another payee are each asked
// about anew (and refused); a
// refused plan allows nothing; a card without approve_plans refuses the
// plan before anyone is asked.
func TestGuestPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a guest")
	}
	ctx := context.Background()
	wasm, _, err := guestbuild.Build(ctx, filepath.Join("..", "..", "testdata", "guests", "plan-pay"), guestbuild.Options{})
	if err != nil {
		t.Fatalf("building plan-pay: %v", err)
	}
	type charge struct{ Payee, Amount, Key string }
	power := charge{"power.example", "84.20", "bill-power"}
	gym := charge{"gym.example", "60.00", "bill-gym"}
	for _, tc := range []struct {
		name     string
		plans    bool // approve_plans on the card
		yes      bool // the person's answer to the plan
		plan, do []charge
		wantPlan string
		wantDo   []string
		charged  []string // payee amount, in order
		asked    int      // questions about single charges
	}{
		{name: "approved", plans: true, yes: true, plan: []charge{power, gym},
			do:       []charge{gym, power, power, {"power.example", "84.21", "bill-power-2"}, {"gym.example", "84.20", "bill-power-3"}},
			wantPlan: "ESUCCESS", wantDo: []string{"ESUCCESS", "ESUCCESS", "ESUCCESS", "EAPPROVAL", "EAPPROVAL"},
			charged: []string{"gym.example 6000", "power.example 8420"}, asked: 2},
		{name: "refused", plans: true, yes: false, plan: []charge{power}, do: []charge{power},
			wantPlan: "EAPPROVAL", wantDo: []string{"EAPPROVAL"}, asked: 1},
		{name: "no plan", plans: true, do: []charge{power}, wantDo: []string{"EAPPROVAL"}, asked: 1},
		{name: "no approve_plans", plans: false, yes: true, plan: []charge{power}, do: []charge{power},
			wantPlan: "EDENIED", wantDo: []string{"EAPPROVAL"}, asked: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := paytest.NewProvider()
			defer p.Close()
			kind := pay.New()
			defer kind.CloseIdleConnections()
			eng := testengine.New(t)
			var mu sync.Mutex
			var planAsks, asked int
			var shown kernel.ApprovalRequest
			aud := &planAuditor{}
			k, err := kernel.New(kernel.Config{Engine: eng, Kinds: []kindapi.Kind{kind}, Auditor: aud,
				Approver: kernel.ApproverFunc(func(_ context.Context, r kernel.ApprovalRequest) (bool, error) {
					mu.Lock()
					defer mu.Unlock()
					if r.Op == kernel.PlanOp {
						planAsks++
						shown = r
						return tc.yes, nil
					}
					asked++
					return false, nil
				})})
			if err != nil {
				t.Fatal(err)
			}
			s, err := k.Grant("pay", testGC, []byte(`{"provider":"`+p.URL+`","allow_private":true,"instrument":{"env":"`+testEnv+`"},`+
				`"payees":["gym.example","power.example"],"currency":"USD","max_amount":"500","approve_above":"50"}`))
			if err != nil {
				t.Fatal(err)
			}
			mod, err := eng.Compile(ctx, wasm)
			if err != nil {
				t.Fatal(err)
			}
			in, _ := json.Marshal(map[string]any{"plan": tc.plan, "do": tc.do})
			task, err := k.Run(ctx, kernel.TaskSpec{Module: mod, Principal: "alice", Input: in, Limits: kernel.Limits{Timeout: time.Minute},
				Grants: []kernel.GrantSpec{{Name: "card", Kind: "pay", Scope: s, ApprovePlans: tc.plans, Audit: true}}})
			if err != nil {
				t.Fatalf("run: %v\nstderr: %s", err, task.Stderr().String())
			}
			raw, ok := task.Result()
			if !ok {
				t.Fatalf("no result; stderr: %s", task.Stderr().String())
			}
			var got struct {
				Plan string
				Do   []string
			}
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatalf("result %q: %v", raw, err)
			}
			if got.Plan != tc.wantPlan || !slices.Equal(got.Do, tc.wantDo) {
				t.Fatalf("plan %s, calls %v; want %s, %v", got.Plan, got.Do, tc.wantPlan, tc.wantDo)
			}
			var charged []string
			for _, c := range p.Charges() {
				charged = append(charged, c.Payee+" "+itoa(c.AmountMinor))
			}
			if !slices.Equal(charged, tc.charged) {
				t.Errorf("charged %v, want %v", charged, tc.charged)
			}
			if asked != tc.asked {
				t.Errorf("%d questions about single charges, want %d", asked, tc.asked)
			}
			wantPlanAsks := 0
			if tc.plans && len(tc.plan) > 0 {
				wantPlanAsks = 1
			}
			if planAsks != wantPlanAsks {
				t.Fatalf("%d questions about the plan, want %d", planAsks, wantPlanAsks)
			}
			if planAsks == 1 {
				text := shown.Text()
				for _, c := range tc.plan {
					if !strings.Contains(text, "charge "+c.Amount+" USD to "+c.Payee) || !strings.Contains(text, c.Key) {
						t.Errorf("the plan shown lacks %v:\n%s", c, text)
					}
				}
			}
			if tc.name == "approved" {
				// Audited: allowed by plan 1 item 2, then item 1.
				if got := aud.byPlan(); !slices.Equal(got, []string{"allowed by plan 1 item 2", "allowed by plan 1 item 1"}) {
					t.Errorf("audited as allowed by a plan: %v", got)
				}
			}
		})
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// planAuditor keeps the audit events.
type planAuditor struct {
	mu  sync.Mutex
	evs []kernel.AuditEvent
}

func (a *planAuditor) Record(_ context.Context, ev kernel.AuditEvent) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.evs = append(a.evs, ev)
	return nil
}

// byPlan is "allowed by plan P item N" of each approval a plan gave.
func (a *planAuditor) byPlan() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, ev := range a.evs {
		if ev.Approval != nil && ev.Approval.Answer == kernel.AnswerPlan {
			i := strings.Index(ev.Reason, "allowed by plan ")
			if i < 0 {
				out = append(out, "?")
				continue
			}
			f := strings.Fields(ev.Reason[i:])
			out = append(out, strings.Join(f[:6], " "))
		}
	}
	return out
}
