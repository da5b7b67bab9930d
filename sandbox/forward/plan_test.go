package forward_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mandatevm/mandate/caps/pay"
	"github.com/mandatevm/mandate/caps/pay/paytest"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox/forward"
)

// TestForwardedPlan: a task on the loopback engine, whose every host call
// is forwarded to the kernel, submits a plan (plan_submit ships its
// request) and makes its charges: the planned one without a question,
// the other asked about and refused, as when it runs here.
func TestForwardedPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a guest")
	}
	ctx := context.Background()
	p := paytest.NewProvider()
	defer p.Close()
	kind := pay.New()
	defer kind.CloseIdleConnections()
	var plans, asked int
	eng := &kernelEngine{Engine: testengine.New(t)}
	k, err := kernel.New(kernel.Config{Engine: eng, Kinds: []kindapi.Kind{kind},
		Approver: kernel.ApproverFunc(func(_ context.Context, r kernel.ApprovalRequest) (bool, error) {
			if r.Op == kernel.PlanOp {
				plans++
				return len(r.Plan) == 1 && r.Plan[0].Summary == "charge 84.20 USD to power.example", nil
			}
			asked++
			return false, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	gc := kindapi.GrantContext{LookupEnv: func(string) (string, bool) { return "tok_test", true }}
	s, err := k.Grant("pay", gc, []byte(`{"provider":"`+p.URL+`","allow_private":true,"instrument":{"env":"CARD"},`+
		`"payees":["gym.example","power.example"],"currency":"USD","max_amount":"500","approve_above":"50"}`))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := eng.Compile(ctx, guest(t, "plan-pay"))
	if err != nil {
		t.Fatal(err)
	}
	mod = forward.NewModule(mod, eng.funcs, forward.Loopback(guestEngine(t), byDigest))
	in := []byte(`{"plan":[{"Payee":"power.example","Amount":"84.20","Key":"k1"}],
		"do":[{"Payee":"gym.example","Amount":"60.00","Key":"k2"},{"Payee":"power.example","Amount":"84.20","Key":"k1"}]}`)
	task, err := k.Run(ctx, kernel.TaskSpec{Module: mod, Principal: "alice", Input: in, Limits: kernel.Limits{Timeout: time.Minute},
		Grants: []kernel.GrantSpec{{Name: "card", Kind: "pay", Scope: s, ApprovePlans: true}}})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	raw, _ := task.Result()
	var got struct {
		Plan string
		Do   []string
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("result %q: %v", raw, err)
	}
	if got.Plan != "ESUCCESS" || len(got.Do) != 2 || got.Do[0] != "EAPPROVAL" || got.Do[1] != "ESUCCESS" {
		t.Errorf("plan %s, calls %v; want ESUCCESS, [EAPPROVAL ESUCCESS]", got.Plan, got.Do)
	}
	if cs := p.Charges(); len(cs) != 1 || cs[0].Payee != "power.example" || plans != 1 || asked != 1 {
		t.Errorf("charges %+v, %d plan questions, %d others; want the planned one, 1 and 1", cs, plans, asked)
	}
}
