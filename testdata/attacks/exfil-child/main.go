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
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

func main() {
	in := attack.TryInput()
	if in.Mode == "child" {
		web := attack.Must(mandate.Lookup("web"))
		_, err := web.Call("fetch", []byte(`{"method":"GET","url":"/api/child-clean"}`))
		attack.Rec("fetch", err)
		attack.Finish()
		return
	}
	sp := attack.Must(mandate.Lookup("spawner"))
	web := attack.Must(mandate.Lookup("web"))
	mydata := attack.Must(mandate.Lookup("mydata"))
	cin, _ := mandate.NewBlob([]byte(`{"mode":"child"}`))
	pb, err := mydata.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`))
	attack.Rec("read_unread", err)
	public := []string{}
	_, err = mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: pb.Handle(), Clearance: &public})
	attack.Rec("passport_to_public_child", err)
	pb.Bytes() // tainted from here on
	c, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: cin.Handle(),
		Caps: []abi.SpawnCap{{Handle: web.Handle(), Name: "web"}}})
	attack.Rec("spawn_after_read", err)
	if err == nil {
		b, err := c.Wait()
		attack.Rec("wait", err)
		if rb, err := b.Bytes(); err == nil {
			var r map[string]string
			json.Unmarshal(rb, &r)
			attack.Set("child.fetch", r["fetch"])
		}
	}
	_, err = mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: cin.Handle(), Clearance: &public,
		Caps: []abi.SpawnCap{{Handle: web.Handle(), Name: "web"}}})
	attack.Rec("public_child_after_read", err)
	attack.Finish()
}
