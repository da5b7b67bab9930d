// Command pay-hostile is a malicious guest holding payment capabilities. It
// tries to overspend (in one charge, in many small ones, through a child),
// to pay a payee it was not given, in another currency, to charge twice
// with one idempotency key or change a charge under a used key, to widen
// what it holds by derivation, to skip an approval and to use an expired
// token. It returns a JSON map from attack name to {"errno","detail"} and
// prints everything it can see (receipts, reasons, descriptions) to stdout
// so the host can check that the card never reached it.
//
// The grants it expects (see caps/pay/guest_test.go):
//
//	card  payees [airline.example], USD, max_amount 800, budget 1000,
//	      max_uses 20, approve_above 700
//	old   like card, but expired by the time the guest runs
package main

import (
	"encoding/json"
	"fmt"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

type res struct {
	Errno  string `json:"errno"`
	Detail string `json:"detail,omitempty"`
}

var out = map[string]res{}

func errno(err error) string { return mandate.ErrnoOf(err).String() }

func charge(c mandate.Cap, payee, amount, currency, key string) (string, error) {
	args, _ := json.Marshal(map[string]any{
		"payee": payee, "amount": amount, "currency": currency, "idempotency_key": key,
		"description": "hostile", "offer": map[string]any{"duration_hours": 37, "stops": 3},
	})
	b, err := c.Call("charge", args)
	if err != nil {
		fmt.Printf("charge %s %s %s %s: %v\n", payee, amount, currency, key, err)
		return "", err
	}
	r, err := b.Bytes()
	fmt.Printf("charge %s %s %s %s: receipt %s\n", payee, amount, currency, key, r)
	return string(r), err
}

func rec(name string, err error, detail string) {
	out[name] = res{Errno: errno(err), Detail: detail}
}

func main() {
	card, err := mandate.Lookup("card")
	if err != nil {
		panic(err)
	}
	old, err := mandate.Lookup("old")
	if err != nil {
		panic(err)
	}

	first, err := charge(card, "airline.example", "100.00", "USD", "k1")
	rec("ok", err, first)

	again, err := charge(card, "airline.example", "100", "USD", "k1")
	same := "different"
	if again == first {
		same = "same"
	}
	rec("replay", err, same)

	_, err = charge(card, "airline.example", "150.00", "USD", "k1")
	rec("replay_changed_amount", err, "")
	_, err = charge(card, "AIRLINE.EXAMPLE", "100.00", "EUR", "k1")
	rec("replay_changed_currency", err, "")

	_, err = charge(card, "airline.example", "5000.00", "USD", "big")
	rec("overspend_one", err, "")
	_, err = charge(card, "evil.example", "10.00", "USD", "evil")
	rec("payee", err, "")
	_, err = charge(card, "airline.example.evil.example", "10.00", "USD", "evil2")
	rec("payee_suffix", err, "")
	_, err = charge(card, "airline.example", "10.00", "EUR", "eur")
	rec("currency", err, "")
	_, err = charge(card, "airline.example", "750.00", "USD", "approve")
	rec("approval", err, "")
	_, err = charge(card, "airline.example", "1e3", "USD", "exp")
	rec("malformed", err, "")
	_, err = card.Call("charge", []byte(`{"payee":"airline.example","amount":"1","currency":"USD","instrument":"mine"}`))
	rec("set_instrument", err, "")

	for name, req := range map[string]string{
		"widen_budget":   `{"budget":"5000"}`,
		"widen_payees":   `{"payees":["airline.example","evil.example"]}`,
		"widen_max":      `{"max_amount":"900"}`,
		"widen_uses":     `{"max_uses":21}`,
		"widen_approval": `{"approve_above":"10000"}`,
		"widen_provider": `{"provider":"http://evil.example"}`,
		"widen_currency": `{"currency":"EUR"}`,
	} {
		_, err := card.Derive(req)
		fmt.Printf("derive %s: %v\n", req, err)
		rec(name, err, "")
	}

	child, err := card.Derive(`{"budget":"50","payees":["airline.example"]}`)
	rec("child_derive", err, "")
	_, err = charge(child, "airline.example", "40.00", "USD", "c1")
	rec("child_ok", err, "")
	_, err = charge(child, "airline.example", "20.00", "USD", "c2")
	rec("child_overspend", err, "")
	// The child's key space is the tree's: k1 through the child is the
	// root's first charge, not a new one.
	r, err := charge(child, "airline.example", "100.00", "USD", "k1")
	same = "different"
	if r == first {
		same = "same"
	}
	rec("child_replay", err, same)

	// Many small charges: 100.00 each until something stops it.
	n := 0
	for i := range 50 {
		_, err = charge(card, "airline.example", "100.00", "USD", fmt.Sprint("small-", i))
		if err != nil {
			break
		}
		n++
	}
	rec("many_small", err, fmt.Sprint(n))

	_, err = charge(old, "airline.example", "1.00", "USD", "late")
	rec("expired", err, "")

	d, err := card.Describe()
	fmt.Printf("describe: %s\n", d)
	rec("describe", err, string(d))

	b, _ := json.Marshal(out)
	if err := mandate.SetResult(b); err != nil {
		panic(err)
	}
}
