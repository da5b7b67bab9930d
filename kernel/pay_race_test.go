package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/mandatevm/mandate/caps/pay"
	"github.com/mandatevm/mandate/caps/pay/paytest"
	"github.com/mandatevm/mandate/caps/spawn"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox"
)

// TestPayBudgetHoldsAgainstRacingChildren: ten children, each passed the
// parent's payment token, charge 15.00 at once against a budget of 100.00.
// Exactly six succeed, the rest get ELIMIT, and the provider holds 90.00.
func TestPayBudgetHoldsAgainstRacingChildren(t *testing.T) {
	racePay(t, kernel.Allowance{Budget: 10000}, 6)
}

// TestMaxUsesHoldsAgainstRacingChildren: the same ten children against
// max_uses = 4 on the parent's card (no budget): exactly four charges.
func TestMaxUsesHoldsAgainstRacingChildren(t *testing.T) {
	racePay(t, kernel.Allowance{MaxUses: 4}, 4)
}

// racePay runs ten children charging 15.00 each at once through copies of
// one card with allowance, and checks that exactly ok of them charged.
func racePay(t *testing.T, allowance kernel.Allowance, ok int) {
	prov := paytest.NewProvider()
	defer prov.Close()
	res := &resolver{wasm: map[string][]byte{}}
	e := newEnv(t, func(c *kernel.Config) {
		c.Kinds = append(c.Kinds, spawn.New(), pay.New())
		c.Modules = res
	})
	res.eng = e.eng
	child := guest(t, "pay-child")
	res.wasm[sandbox.Digest(child)] = child

	mod, err := e.eng.Compile(context.Background(), guest(t, "pay-racer"))
	if err != nil {
		t.Fatal(err)
	}
	grant := func(kind, spec string) kindapi.Scope {
		s, err := e.k.Grant(kind, kindapi.GrantContext{LookupEnv: func(string) (string, bool) { return "tok_test", true }}, []byte(spec))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	in, _ := json.Marshal(map[string]any{"Child": sandbox.Digest(child), "N": 10, "Amount": "15.00"})
	task, err := e.k.Run(context.Background(), kernel.TaskSpec{
		Module: mod, Principal: "alice", Input: in,
		Limits: kernel.Limits{Timeout: 2 * time.Minute, Memory: 64 << 20},
		Grants: []kernel.GrantSpec{
			{Name: "card", Kind: "pay", Scope: grant("pay", fmt.Sprintf(`{"provider":%q,"allow_private":true,"instrument":{"env":"CARD"},"payees":["airline.example"],"currency":"USD"}`, prov.URL)), Allowance: allowance},
			{Name: "children", Kind: "spawn", Scope: grant("spawn", fmt.Sprintf(`{"modules":[%q],"max_children":10}`, sandbox.Digest(child)))},
		},
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, task.Stderr())
	}
	raw, _ := task.Result()
	var counts map[string]int
	if err := json.Unmarshal(raw, &counts); err != nil {
		t.Fatalf("result %q: %v", raw, err)
	}
	if counts["ESUCCESS"] != ok || counts["ELIMIT"] != 10-ok {
		t.Fatalf("children: %v, want %d ESUCCESS and %d ELIMIT", counts, ok, 10-ok)
	}
	if got := prov.Total(); got != int64(ok)*1500 {
		t.Fatalf("provider total %d minor units, want %d", got, ok*1500)
	}
}
