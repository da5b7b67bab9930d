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
)

func main() {
	readInput()
	card := must(mandate.Lookup("card"))
	charge := func(c mandate.Cap, amount string) error {
		a, _ := json.Marshal(map[string]string{"payee": "airline.example", "amount": amount, "currency": "USD"})
		_, err := c.Call("charge", a)
		return err
	}
	rec("whole", charge(card, "300.00"))
	rec("first_80", charge(card, "80.00"))
	rec("second_80", charge(card, "80.00"))
	var kids []mandate.Cap
	for i := 0; i < 3; i++ {
		k, err := card.Derive(`{"budget":"250"}`)
		rec("derive_"+strconv.Itoa(i), err)
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
	rec("kids_80", stop)
	note("kids_80_ok", strconv.Itoa(ok))
	cents := 0
	stop = nil
	for i := 0; i < 50 && stop == nil; i++ {
		if err := charge(kids[i%3], "0.01"); err != nil {
			stop = err
		} else {
			cents++
		}
	}
	rec("cents", stop)
	note("cents_ok", strconv.Itoa(cents))
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
