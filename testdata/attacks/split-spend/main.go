// Command split-spend splits a purchase the grant does not allow (300 on a
// card with max 100 per charge and a 250 budget) into pieces: one charge
// too big, then 80s, then through several derived capabilities each given
// the whole budget, then many one-cent charges. The budget and uses are
// shared by the whole derivation tree and reserved on every ancestor's
// ledger (law 5): ELIMIT once 250 or 10 uses are spent.
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
	charge := func(c mandate.Cap, amount string) error {
		a, _ := json.Marshal(map[string]string{"payee": "airline.example", "amount": amount, "currency": "USD"})
		_, err := c.Call("charge", a)
		return err
	}
	attack.Rec("whole", charge(card, "300.00"))
	attack.Rec("first_80", charge(card, "80.00"))
	attack.Rec("second_80", charge(card, "80.00"))
	var kids []mandate.Cap
	for i := 0; i < 3; i++ {
		k, err := card.Derive(`{"budget":"250"}`)
		attack.Rec("derive_"+strconv.Itoa(i), err)
		kids = append(kids, k)
	}
	ok := 0
	var stop error
	for i := 0; i < 9 && stop == nil; i++ {
		if err := charge(kids[i%3], "80.00"); err != nil {
			stop = err
		} else {
			ok++
		}
	}
	attack.Rec("kids_80", stop)
	attack.Note("kids_80_ok", strconv.Itoa(ok))
	cents := 0
	stop = nil
	for i := 0; i < 50 && stop == nil; i++ {
		if err := charge(kids[i%3], "0.01"); err != nil {
			stop = err
		} else {
			cents++
		}
	}
	attack.Rec("cents", stop)
	attack.Note("cents_ok", strconv.Itoa(cents))
	attack.Finish()
}
