// Command launder-child tries to shed its label through children: after
// reading the passport it asks for a child cleared for public data only,
// hands a public child the passport blob, and spawns a child that tries to
// reach the public sink on its own. A child starts at its parent's label
// and its clearance must be above it (law 6): EFLOW throughout.
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

func main() {
	in := attack.TryInput()
	switch in.Mode {
	case "child":
		web := attack.Must(mandate.Lookup("web"))
		_, err := web.Call("fetch", []byte(`{"method":"GET","url":"/api/launder-child"}`))
		attack.Rec("fetch", err)
		b, _ := mandate.NewBlob([]byte("fresh"))
		_, err = web.Call("fetch", []byte(`{"method":"POST","url":"/api/echo","body_blob":`+itoa(int(b.Handle()))+`}`))
		attack.Rec("fresh_blob", err)
		attack.Finish()
		return
	}
	sp := attack.Must(mandate.Lookup("spawner"))
	web := attack.Must(mandate.Lookup("web"))
	mydata := attack.Must(mandate.Lookup("mydata"))
	cin, _ := mandate.NewBlob([]byte(`{"mode":"child"}`))
	pb, _ := mydata.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`))
	pb.Bytes()
	public := []string{}
	_, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: cin.Handle(), Clearance: &public})
	attack.Rec("public_child", err)
	other := []string{"pii:bob"}
	_, err = mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: cin.Handle(), Clearance: &other})
	attack.Rec("other_clearance_child", err)
	c, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: cin.Handle(),
		Caps: []abi.SpawnCap{{Handle: web.Handle(), Name: "web"}}})
	attack.Rec("tainted_child", err)
	if err == nil {
		b, err := c.Wait()
		attack.Rec("wait", err)
		if rb, err := b.Bytes(); err == nil {
			var r map[string]string
			json.Unmarshal(rb, &r)
			for k, v := range r {
				attack.Set("child."+k, v)
			}
		}
	}
	attack.Finish()
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
