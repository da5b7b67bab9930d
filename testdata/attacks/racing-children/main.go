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
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

func main() {
	in := attack.TryInput()
	card := attack.Must(mandate.Lookup("card"))
	if in.Mode == "child" {
		a := []byte(`{"payee":"airline.example","amount":"80.00","currency":"USD","idempotency_key":"race"}`)
		_, err := card.Call("charge", a)
		attack.Rec("keyed", err)
		n := 0
		for i := 0; i < 10; i++ {
			_, err = card.Call("charge", []byte(`{"payee":"airline.example","amount":"80.00","currency":"USD"}`))
			if err != nil {
				break
			}
			n++
		}
		attack.Rec("stop", err)
		attack.Note("ok", strconv.Itoa(n))
		attack.Finish()
		return
	}
	sp := attack.Must(mandate.Lookup("spawner"))
	cin, _ := mandate.NewBlob([]byte(`{"mode":"child"}`))
	var kids []mandate.Task
	for i := 0; i < 4; i++ {
		c, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: cin.Handle(), Memory: 16 << 20,
			Caps: []abi.SpawnCap{{Handle: card.Handle(), Name: "card", Narrow: json.RawMessage(`{"budget":"250"}`)}}})
		attack.Rec("spawn_"+strconv.Itoa(i), err)
		kids = append(kids, c)
	}
	total, keyed := 0, 0
	for i, c := range kids {
		b, err := c.Wait()
		attack.Rec("wait_"+strconv.Itoa(i), err)
		rb, _ := b.Bytes()
		var r map[string]string
		json.Unmarshal(rb, &r)
		n, _ := strconv.Atoi(r["#ok"])
		total += n
		if r["keyed"] == "ESUCCESS" {
			keyed++
		}
		if r["stop"] != "ELIMIT" {
			attack.Set("child_stop", r["stop"])
		}
	}
	if !attack.Has("child_stop") {
		attack.Set("child_stop", "ELIMIT")
	}
	attack.Note("unkeyed_ok", strconv.Itoa(total))
	attack.Note("keyed_ok", strconv.Itoa(keyed))
	attack.Finish()
}
