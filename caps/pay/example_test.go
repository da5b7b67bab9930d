package pay_test

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/caps/pay"
	"github.com/mandatevm/mandate/caps/pay/paytest"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/kernel/kindapi/kindtest"
)

// Example narrows a pay capability and charges through it as the kernel
// does: Prepare checks the charge against the scope and tells the kernel
// what it costs (the kernel debits budgets and asks for approvals), the
// kind reserves its idempotency key, then the effect makes the charge. A
// replay of a charge already made is free.
func Example() {
	p := paytest.NewProvider()
	defer p.Close()
	k := pay.New()
	gc := kindapi.GrantContext{LookupEnv: func(string) (string, bool) { return "tok_visa_4242", true }}
	root, err := k.Grant(gc, []byte(`{"provider":"`+p.URL+`","allow_private":true,
		"instrument":{"env":"CARD_TOKEN"},"payees":["airline.example"],"currency":"USD",
		"max_amount":"800 USD","approve_above":"500 USD"}`))
	if err != nil {
		panic(err)
	}
	child, _ := k.Narrow(root, []byte(`{"max_amount":"700"}`))
	_, err = k.Narrow(child, []byte(`{"max_amount":"900"}`))
	fmt.Println(err)

	charge := func(args string) {
		call := kindtest.NewCall("charge", []byte(args), child, kindapi.TaskInfo{ID: "t1"}, hclog.NewNullLogger(), nil)
		op, err := k.Prepare(call)
		if err != nil {
			fmt.Println(kindapi.ErrnoOf(err), err)
			return
		}
		fmt.Printf("amount %d, free %v, approval %q\n", op.Amount, op.Free, op.NeedsApproval)
		// The kernel's reserve step: the kind claims the idempotency key.
		if op.Reserve != nil {
			if _, _, err := op.Reserve(); err != nil {
				fmt.Println(kindapi.ErrnoOf(err), err)
				return
			}
		}
		res, err := op.Effect(context.Background())
		if err != nil {
			fmt.Println(kindapi.ErrnoOf(err), err)
			return
		}
		fmt.Println(string(res.Data))
	}
	charge(`{"payee":"airline.example","amount":"612.00","currency":"USD","idempotency_key":"trip-42"}`)
	charge(`{"payee":"airline.example","amount":"612.00","currency":"USD","idempotency_key":"trip-42"}`)
	charge(`{"payee":"airline.example","amount":"750.00","currency":"USD","idempotency_key":"trip-43"}`)
	fmt.Println(len(p.Charges()), "charge(s) at the provider")
	// Output:
	// pay: narrowing would widen the capability: max_amount 900.00 exceeds 700.00
	// amount 61200, free false, approval "the amount is above approve_above 500.00 USD"
	// {"charge_id":"ch_1","amount":"612.00","currency":"USD","payee":"airline.example","idempotency_key":"trip-42","status":"succeeded"}
	// amount 0, free true, approval ""
	// {"charge_id":"ch_1","amount":"612.00","currency":"USD","payee":"airline.example","idempotency_key":"trip-42","status":"succeeded"}
	// EDENIED pay: charge 750.00 USD to airline.example exceeds the maximum charge of 700.00 USD
	// 1 charge(s) at the provider
}
