// Command request-flood sends as many requests as it can through one net
// capability, then through capabilities derived from it (which share its
// rate), hoping that narrowing resets the budget. The capability's rate
// (kernel.GrantSpec.Rate) stops it with ELIMIT, for the whole derivation
// tree, children's copies included (law 10).
package main

import (
	"encoding/json"
	"strconv"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

func main() {
	in := attack.ReadInput()
	web := attack.Must(mandate.Lookup("web"))
	req := []byte(`{"method":"GET","url":"/api/flood"}`)
	if in.Mode == "child" {
		n := 0
		var stop error
		for i := 0; i < 500; i++ {
			if _, err := web.Call("fetch", req); err != nil {
				stop = err
				break
			}
			n++
		}
		attack.Rec("stop", stop)
		attack.Note("ok", strconv.Itoa(n))
		attack.Finish()
		return
	}
	n := 0
	var stop error
	for i := 0; i < 500; i++ {
		if _, err := web.Call("fetch", req); err != nil {
			stop = err
			break
		}
		n++
	}
	attack.Rec("root", stop)
	attack.Note("root_ok", strconv.Itoa(n))
	d, err := web.Derive(`{"paths":["/api/flood"]}`)
	attack.Rec("derive", err)
	m := 0
	stop = nil
	for i := 0; i < 500 && err == nil; i++ {
		if _, err := d.Call("fetch", req); err != nil {
			stop = err
			break
		}
		m++
	}
	attack.Rec("derived", stop)
	attack.Note("derived_ok", strconv.Itoa(m))
	// A child's copy draws on the same allowance.
	sp := attack.Must(mandate.Lookup("spawner"))
	cin, _ := json.Marshal(map[string]string{"mode": "child"})
	cb, _ := mandate.NewBlob(cin)
	c, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: cb.Handle(),
		Caps: []abi.SpawnCap{{Handle: web.Handle(), Name: "web"}}})
	attack.Rec("spawn", err)
	if err == nil {
		b, err := c.Wait()
		attack.Rec("wait", err)
		if rb, err := b.Bytes(); err == nil {
			var r map[string]string
			json.Unmarshal(rb, &r)
			attack.Set("child.stop", r["stop"])
			attack.Note("child_ok", r["#ok"])
		}
	}
	attack.Finish()
}
