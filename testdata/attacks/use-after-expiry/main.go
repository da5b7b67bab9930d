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
)

const charge = `{"payee":"airline.example","amount":"5.00","currency":"USD"}`

func main() {
	raw, _ := mandate.InputBytes()
	var in input
	json.Unmarshal(raw, &in)
	old := must(mandate.Lookup("old"))
	if in.Mode == "child" {
		_, err := old.Call("charge", []byte(charge))
		rec("charge", err)
		finish()
		return
	}
	_, err := old.Call("charge", []byte(charge))
	rec("expired_charge", err)
	_, err = old.Call("charge", []byte(charge))
	rec("expired_again", err)
	d, err := old.Derive(`{"budget":"10"}`)
	rec("derive_expired", err)
	if err == nil {
		_, err = d.Call("charge", []byte(charge))
		rec("derived_charge", err)
	}
	_, err = old.Derive(`{"expires":"2030-01-01T00:00:00Z"}`)
	rec("extend_expired", err)
	sp := must(mandate.Lookup("spawner"))
	cin, _ := mandate.NewBlob([]byte(`{"mode":"child"}`))
	c, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: cin.Handle(),
		Caps: []abi.SpawnCap{{Handle: old.Handle(), Name: "old"}}})
	rec("spawn_with_expired", err)
	if err == nil {
		if b, err := c.Wait(); err == nil {
			rb, _ := b.Bytes()
			var r map[string]string
			json.Unmarshal(rb, &r)
			res["child.charge"] = r["charge"]
		}
	}
	card := must(mandate.Lookup("card"))
	past, err := card.Derive(`{"expires":"2026-11-29T12:30:00Z"}`)
	rec("derive_past_expiry", err)
	if err == nil {
		_, err = past.Call("charge", []byte(charge))
		rec("charge_past_expiry", err)
	}
	_, err = card.Derive(`{"expires":"2030-01-01T00:00:00Z"}`)
	rec("derive_outlive_parent", err)
	_, err = card.Derive(`{"expires":"1000h"}`)
	rec("derive_outlive_duration", err)
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
