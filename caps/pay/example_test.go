package pay_test

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/caps/pay"
	"github.com/mandatevm/mandate/caps/pay/paytest"
	"github.com/mandatevm/mandate/kernel"
)

func Example() {
	p := paytest.NewProvider()
	defer p.Close()
	k := pay.New()
	gc := kernel.GrantContext{LookupEnv: func(string) (string, bool) { return "tok_visa_4242", true }}
	root, err := k.Grant(gc, []byte(`{"provider":"`+p.URL+`","allow_private":true,
		"instrument":{"env":"CARD_TOKEN"},"payees":["airline.example"],"currency":"USD",
		"max_amount":"800 USD","budget":"1000 USD"}`))
	if err != nil {
		panic(err)
	}
	child, _ := k.Narrow(root, []byte(`{"budget":"700"}`))
	_, err = k.Narrow(child, []byte(`{"budget":"900"}`))
	fmt.Println(err)

	charge := func(args string) {
		call := kernel.NewCall("charge", []byte(args), child, kernel.TaskInfo{ID: "t1"}, hclog.NewNullLogger(), nil)
		res, err := k.Invoke(context.Background(), call)
		if err != nil {
			fmt.Println(kernel.ErrnoOf(err), err)
			return
		}
		fmt.Println(string(res.Data))
	}
	charge(`{"payee":"airline.example","amount":"612.00","currency":"USD","idempotency_key":"trip-42"}`)
	charge(`{"payee":"airline.example","amount":"612.00","currency":"USD","idempotency_key":"trip-42"}`)
	charge(`{"payee":"airline.example","amount":"100.00","currency":"USD","idempotency_key":"trip-43"}`)
	fmt.Println(len(p.Charges()), "charge(s) at the provider")
	// Output:
	// pay: narrowing would widen the capability: budget 900.00 exceeds 700.00
	// {"charge_id":"ch_1","amount":"612.00","currency":"USD","payee":"airline.example","idempotency_key":"trip-42","status":"succeeded"}
	// {"charge_id":"ch_1","amount":"612.00","currency":"USD","payee":"airline.example","idempotency_key":"trip-42","status":"succeeded"}
	// ELIMIT pay: budget exhausted: 612.00 of 700.00 spent, 100.00 more requested
	// 1 charge(s) at the provider
}
