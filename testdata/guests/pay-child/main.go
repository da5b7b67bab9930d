// Command pay-child charges the "card" it was passed once, with the key
// and amount in its input, and reports the errno.
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

func main() {
	in, _ := mandate.InputBytes()
	var a struct{ Key, Amount string }
	json.Unmarshal(in, &a)
	card, err := mandate.Lookup("card")
	if err != nil {
		panic(err)
	}
	args, _ := json.Marshal(map[string]any{"payee": "airline.example", "amount": a.Amount, "currency": "USD", "idempotency_key": a.Key})
	_, err = card.Call("charge", args)
	mandate.SetResult([]byte(mandate.ErrnoOf(err).String()))
}
