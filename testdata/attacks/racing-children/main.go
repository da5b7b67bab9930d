// Command racing-children spawns four children, each given the card
// narrowed to the whole budget, which all charge at once: first with one
// shared idempotency key, then 80 at a time until refused. Reservations
// are made on every ancestor's ledger atomically and a key in flight is
// waited for (law 5): one charge for the key, and never more than the
// budget in all.
package main

import (
	"encoding/json"
	"strconv"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

func main() {
	raw, _ := mandate.InputBytes()
	var in input
	json.Unmarshal(raw, &in)
	card := must(mandate.Lookup("card"))
	if in.Mode == "child" {
		a := []byte(`{"payee":"airline.example","amount":"80.00","currency":"USD","idempotency_key":"race"}`)
		_, err := card.Call("charge", a)
		rec("keyed", err)
		n := 0
		for i := 0; i < 10; i++ {
			_, err = card.Call("charge", []byte(`{"payee":"airline.example","amount":"80.00","currency":"USD"}`))
			if err != nil {
				break
			}
			n++
		}
		rec("stop", err)
		note("ok", strconv.Itoa(n))
		finish()
		return
	}
	sp := must(mandate.Lookup("spawner"))
	cin, _ := mandate.NewBlob([]byte(`{"mode":"child"}`))
	var kids []mandate.Task
	for i := 0; i < 4; i++ {
		c, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: cin.Handle(), Memory: 16 << 20,
			Caps: []abi.SpawnCap{{Handle: card.Handle(), Name: "card", Narrow: json.RawMessage(`{"budget":"250"}`)}}})
		rec("spawn_"+strconv.Itoa(i), err)
		kids = append(kids, c)
	}
	total, keyed := 0, 0
	for i, c := range kids {
		b, err := c.Wait()
		rec("wait_"+strconv.Itoa(i), err)
		rb, _ := b.Bytes()
		var r map[string]string
		json.Unmarshal(rb, &r)
		n, _ := strconv.Atoi(r["#ok"])
		total += n
		if r["keyed"] == "ESUCCESS" {
			keyed++
		}
		if r["stop"] != "ELIMIT" {
			res["child_stop"] = r["stop"]
		}
	}
	if _, ok := res["child_stop"]; !ok {
		res["child_stop"] = "ELIMIT"
	}
	note("unkeyed_ok", strconv.Itoa(total))
	note("keyed_ok", strconv.Itoa(keyed))
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
