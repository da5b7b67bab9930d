// Command use-after-expiry uses a payment capability that has expired
// ("old", granted for an hour two hours ago), derives from it, passes it
// to a child, derives a capability from the live card with an expiry
// already past, and one that outlives its parent. Expiry is checked on
// every use and only ever shortened (law 3): EEXPIRED or EDENIED, nothing
// charged.
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

const charge = `{"payee":"airline.example","amount":"5.00","currency":"USD"}`

func main() {
	in := attack.TryInput()
	old := attack.Must(mandate.Lookup("old"))
	if in.Mode == "child" {
		_, err := old.Call("charge", []byte(charge))
		attack.Rec("charge", err)
		attack.Finish()
		return
	}
	_, err := old.Call("charge", []byte(charge))
	attack.Rec("expired_charge", err)
	_, err = old.Call("charge", []byte(charge))
	attack.Rec("expired_again", err)
	d, err := old.Derive(`{"budget":"10"}`)
	attack.Rec("derive_expired", err)
	if err == nil {
		_, err = d.Call("charge", []byte(charge))
		attack.Rec("derived_charge", err)
	}
	_, err = old.Derive(`{"expires":"2030-01-01T00:00:00Z"}`)
	attack.Rec("extend_expired", err)
	sp := attack.Must(mandate.Lookup("spawner"))
	cin, _ := mandate.NewBlob([]byte(`{"mode":"child"}`))
	c, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: cin.Handle(),
		Caps: []abi.SpawnCap{{Handle: old.Handle(), Name: "old"}}})
	attack.Rec("spawn_with_expired", err)
	if err == nil {
		if b, err := c.Wait(); err == nil {
			rb, _ := b.Bytes()
			var r map[string]string
			json.Unmarshal(rb, &r)
			attack.Set("child.charge", r["charge"])
		}
	}
	card := attack.Must(mandate.Lookup("card"))
	past, err := card.Derive(`{"expires":"2026-11-29T12:30:00Z"}`)
	attack.Rec("derive_past_expiry", err)
	if err == nil {
		_, err = past.Call("charge", []byte(charge))
		attack.Rec("charge_past_expiry", err)
	}
	_, err = card.Derive(`{"expires":"2030-01-01T00:00:00Z"}`)
	attack.Rec("derive_outlive_parent", err)
	_, err = card.Derive(`{"expires":"1000h"}`)
	attack.Rec("derive_outlive_duration", err)
	attack.Finish()
}
