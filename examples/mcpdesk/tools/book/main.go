// Command book is the book_appointment tool of the MCP desk: its
// arguments are {"service", "slot", "price"}, and it books the slot by
// paying its price to the clinic with its pay capability "card". The card
// never enters the tool; the capability holds the limits: one payee, USD,
// a maximum, and a person's yes above a threshold (EAPPROVAL without it).
// Its result is the payment's receipt.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

// clinic is the payee: the only one the capability allows.
const clinic = "smile-dental.example"

func main() {
	in, err := mandate.InputBytes()
	if err != nil {
		fail(err)
	}
	var a struct {
		Service string `json:"service"`
		Slot    string `json:"slot"`
		Price   string `json:"price"`
	}
	if err := json.Unmarshal(in, &a); err != nil {
		fail(err)
	}
	card, err := mandate.Lookup("card")
	if err != nil {
		fail(err)
	}
	charge, _ := json.Marshal(map[string]any{
		"payee":           clinic,
		"amount":          a.Price,
		"currency":        "USD",
		"idempotency_key": key(a.Service + "@" + a.Slot), // booking the same slot twice pays once
		"description":     a.Service + " at " + clinic + ", " + a.Slot,
		"offer":           map[string]string{"service": a.Service, "slot": a.Slot},
	})
	receipt, err := card.Call("charge", charge)
	if err != nil {
		fail(err)
	}
	if err := mandate.SetResultBlob(receipt); err != nil {
		fail(err)
	}
}

// key is s as an idempotency key: printable ASCII without spaces, at most
// 255 bytes.
func key(s string) string {
	k := []byte(s)
	for i, c := range k {
		if c <= ' ' || c > '~' {
			k[i] = '_'
		}
	}
	if len(k) > 255 {
		k = k[:255]
	}
	return string(k)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "book_appointment:", err)
	os.Exit(1)
}
