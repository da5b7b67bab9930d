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
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

func main() {
	attack.ReadInput()
	card := attack.Must(mandate.Lookup("card"))
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
	attack.Rec("first", err)
	id2, err := charge(card, "50.00", "order-1")
	attack.Rec("replay", err)
	attack.Note("same_receipt", strconv.FormatBool(id1 == id2 && id1 != ""))
	_, err = charge(card, "60.00", "order-1")
	attack.Rec("replay_other_amount", err)
	child := attack.Must(card.Derive(`{"budget":"100"}`))
	id3, err := charge(child, "50.00", "order-1")
	attack.Rec("replay_through_child", err)
	attack.Note("child_same_receipt", strconv.FormatBool(id3 == id1))
	n := 0
	var last error
	for i := 0; i < 20; i++ {
		if _, err := charge(card, "50.00", ""); err != nil {
			last = err
			break
		}
		n++
	}
	attack.Rec("until_refused", last)
	attack.Note("more_charges", strconv.Itoa(n))
	attack.Finish()
}
