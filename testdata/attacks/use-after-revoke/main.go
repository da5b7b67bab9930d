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
)

func main() {
	raw, _ := mandate.InputBytes()
	var in input
	json.Unmarshal(raw, &in)
	if in.Mode == "child" {
		web := must(mandate.Lookup("web"))
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
		rec("stop", err)
		note("ok", strconv.Itoa(n))
		finish()
		return
	}
	web := must(mandate.Lookup("web"))
	d1 := must(web.Derive(`{"paths":["/api"]}`))
	d2 := must(d1.Derive(`{"methods":["GET"]}`))
	sp := must(mandate.Lookup("spawner"))
	cin, _ := mandate.NewBlob([]byte(`{"mode":"child"}`))
	c, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: cin.Handle(),
		Caps: []abi.SpawnCap{{Handle: d2.Handle(), Name: "web"}}})
	rec("spawn", err)
	time.Sleep(200 * time.Millisecond) // let the child fetch a few times
	rec("revoke", d1.Revoke())
	_, err = d1.Call("fetch", []byte(`{"method":"GET","url":"/api/after-revoke"}`))
	rec("revoked_call", err)
	_, err = d2.Call("fetch", []byte(`{"method":"GET","url":"/api/after-revoke"}`))
	rec("descendant_call", err)
	_, err = d2.Derive(`{}`)
	rec("derive_from_revoked", err)
	_, err = mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: cin.Handle(),
		Caps: []abi.SpawnCap{{Handle: d2.Handle(), Name: "web"}}})
	rec("pass_revoked", err)
	rec("revoke_again", d1.Revoke())
	b, err := c.Wait()
	rec("wait", err)
	if rb, err := b.Bytes(); err == nil {
		var r map[string]string
		json.Unmarshal(rb, &r)
		res["child.stop"] = r["stop"]
		note("child_ok", r["#ok"])
	}
	_, err = web.Call("fetch", []byte(`{"method":"GET","url":"/api/root-still-works"}`))
	rec("root_after", err)
	// A revoked root grant stays revoked however it is found.
	card := must(mandate.Lookup("card"))
	rec("revoke_root", card.Revoke())
	again := must(mandate.Lookup("card"))
	_, err = again.Call("charge", []byte(`{"payee":"airline.example","amount":"1.00","currency":"USD"}`))
	rec("root_relookup", err)
	spr := must(mandate.Lookup("spawner"))
	rec("revoke_spawner", spr.Revoke())
	_, err = mandate.Spawn(spr, abi.SpawnRequest{Module: in.Self, Input: cin.Handle()})
	rec("spawn_revoked", err)
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
