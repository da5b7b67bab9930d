// Command exfil-child tries to get Alice's passport out through a child
// task: after reading it, it spawns a child with the public web capability
// (the child starts at its parent's label, law 6) and asks for a child
// cleared for public data only; before reading it, it hands the unread
// passport to a public child as input. Law 7 at the child's sink, and a
// child's clearance must be above what it is given: EFLOW.
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

func main() {
	raw, _ := mandate.InputBytes()
	var in input
	json.Unmarshal(raw, &in)
	if in.Mode == "child" {
		web := must(mandate.Lookup("web"))
		_, err := web.Call("fetch", []byte(`{"method":"GET","url":"/api/child-clean"}`))
		rec("fetch", err)
		finish()
		return
	}
	sp := must(mandate.Lookup("spawner"))
	web := must(mandate.Lookup("web"))
	mydata := must(mandate.Lookup("mydata"))
	cin, _ := mandate.NewBlob([]byte(`{"mode":"child"}`))
	pb, err := mydata.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`))
	rec("read_unread", err)
	public := []string{}
	_, err = mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: pb.Handle(), Clearance: &public})
	rec("passport_to_public_child", err)
	pb.Bytes() // tainted from here on
	c, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: cin.Handle(),
		Caps: []abi.SpawnCap{{Handle: web.Handle(), Name: "web"}}})
	rec("spawn_after_read", err)
	if err == nil {
		b, err := c.Wait()
		rec("wait", err)
		if rb, err := b.Bytes(); err == nil {
			var r map[string]string
			json.Unmarshal(rb, &r)
			res["child.fetch"] = r["fetch"]
		}
	}
	_, err = mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: cin.Handle(), Clearance: &public,
		Caps: []abi.SpawnCap{{Handle: web.Handle(), Name: "web"}}})
	rec("public_child_after_read", err)
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
