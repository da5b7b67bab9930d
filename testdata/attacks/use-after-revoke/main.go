// Command use-after-revoke keeps using capabilities after revoking them:
// a derived capability and its own derivations, a copy passed to a child
// that keeps fetching, a revoked root grant looked up again, derives and
// spawns from revoked capabilities. Revocation is transitive, in every
// task, at the next use (law 4): EREVOKED, nothing sent after it.
package main

import (
	"encoding/json"
	"strconv"
	"time"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

func main() {
	in := attack.TryInput()
	if in.Mode == "child" {
		web := attack.Must(mandate.Lookup("web"))
		n := 0
		var err error
		for i := 0; i < 2000; i++ {
			_, err = web.Call("fetch", []byte(`{"method":"GET","url":"/api/child-before-revoke"}`))
			if err != nil {
				break
			}
			n++
			time.Sleep(5 * time.Millisecond)
		}
		attack.Rec("stop", err)
		attack.Note("ok", strconv.Itoa(n))
		attack.Finish()
		return
	}
	web := attack.Must(mandate.Lookup("web"))
	d1 := attack.Must(web.Derive(`{"paths":["/api"]}`))
	d2 := attack.Must(d1.Derive(`{"methods":["GET"]}`))
	sp := attack.Must(mandate.Lookup("spawner"))
	cin, _ := mandate.NewBlob([]byte(`{"mode":"child"}`))
	c, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: cin.Handle(),
		Caps: []abi.SpawnCap{{Handle: d2.Handle(), Name: "web"}}})
	attack.Rec("spawn", err)
	time.Sleep(200 * time.Millisecond) // let the child fetch a few times
	attack.Rec("revoke", d1.Revoke())
	_, err = d1.Call("fetch", []byte(`{"method":"GET","url":"/api/after-revoke"}`))
	attack.Rec("revoked_call", err)
	_, err = d2.Call("fetch", []byte(`{"method":"GET","url":"/api/after-revoke"}`))
	attack.Rec("descendant_call", err)
	_, err = d2.Derive(`{}`)
	attack.Rec("derive_from_revoked", err)
	_, err = mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: cin.Handle(),
		Caps: []abi.SpawnCap{{Handle: d2.Handle(), Name: "web"}}})
	attack.Rec("pass_revoked", err)
	attack.Rec("revoke_again", d1.Revoke())
	b, err := c.Wait()
	attack.Rec("wait", err)
	if rb, err := b.Bytes(); err == nil {
		var r map[string]string
		json.Unmarshal(rb, &r)
		attack.Set("child.stop", r["stop"])
		attack.Note("child_ok", r["#ok"])
	}
	_, err = web.Call("fetch", []byte(`{"method":"GET","url":"/api/root-still-works"}`))
	attack.Rec("root_after", err)
	// A revoked root grant stays revoked however it is found.
	card := attack.Must(mandate.Lookup("card"))
	attack.Rec("revoke_root", card.Revoke())
	again := attack.Must(mandate.Lookup("card"))
	_, err = again.Call("charge", []byte(`{"payee":"airline.example","amount":"1.00","currency":"USD"}`))
	attack.Rec("root_relookup", err)
	spr := attack.Must(mandate.Lookup("spawner"))
	attack.Rec("revoke_spawner", spr.Revoke())
	_, err = mandate.Spawn(spr, abi.SpawnRequest{Module: in.Self, Input: cin.Handle()})
	attack.Rec("spawn_revoked", err)
	attack.Finish()
}
