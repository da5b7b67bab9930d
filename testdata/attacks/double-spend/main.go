// Command double-spend charges twice for one purchase: the same
// idempotency key again (one charge, the same receipt), the key with
// another amount or payee, and then charges without keys until the budget
// is gone. Keys are kept across the capability's tree and the budget is
// debited in the kernel (law 5): the provider's total is the budget.
package main

import (
	"encoding/json"
	"strconv"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

func main() {
	readInput()
	card := must(mandate.Lookup("card"))
	charge := func(c mandate.Cap, amount, key string) (string, error) {
		m := map[string]string{"payee": "airline.example", "amount": amount, "currency": "USD"}
		if key != "" {
			m["idempotency_key"] = key
		}
		a, _ := json.Marshal(m)
		b, err := c.Call("charge", a)
		if err != nil {
			return "", err
		}
		raw, _ := b.Bytes()
		var r struct {
			ID string `json:"charge_id"`
		}
		json.Unmarshal(raw, &r)
		return r.ID, nil
	}
	id1, err := charge(card, "50.00", "order-1")
	rec("first", err)
	id2, err := charge(card, "50.00", "order-1")
	rec("replay", err)
	note("same_receipt", strconv.FormatBool(id1 == id2 && id1 != ""))
	_, err = charge(card, "60.00", "order-1")
	rec("replay_other_amount", err)
	child := must(card.Derive(`{"budget":"100"}`))
	id3, err := charge(child, "50.00", "order-1")
	rec("replay_through_child", err)
	note("child_same_receipt", strconv.FormatBool(id3 == id1))
	n := 0
	var last error
	for i := 0; i < 20; i++ {
		if _, err := charge(card, "50.00", ""); err != nil {
			last = err
			break
		}
		n++
	}
	rec("until_refused", last)
	note("more_charges", strconv.Itoa(n))
	finish()
}

// res collects each attempt's errno (keys) and details ("#" keys).
var res = map[string]string{}

func rec(k string, err error) { res[k] = mandate.ErrnoOf(err).String() }

func note(k, v string) { res["#"+k] = v }

func finish() {
	b, _ := json.Marshal(res)
	if err := mandate.SetResult(b); err != nil {
		panic(err)
	}
}

type input struct {
	Granted     string            `json:"granted"`
	GrantedHost string            `json:"granted_host"`
	GrantedPort string            `json:"granted_port"`
	Evil        string            `json:"evil"`
	EvilPort    string            `json:"evil_port"`
	Self        string            `json:"self"`
	Digests     map[string]string `json:"digests"`
	Mode        string            `json:"mode"`
}

func readInput() input {
	var in input
	b, err := mandate.InputBytes()
	if err != nil {
		panic(err)
	}
	if err := json.Unmarshal(b, &in); err != nil {
		panic(err)
	}
	return in
}

func must(c mandate.Cap, err error) mandate.Cap {
	if err != nil {
		panic(err)
	}
	return c
}
