// Command widen-spawn asks for more when spawning: capabilities passed
// with narrowings that widen them, more memory or time than it has, a
// module the spawn capability does not allow, a child clearance above its
// own, a principal of its choosing, a capability as input. Every child
// gets only narrower (law 3): EDENIED, EFLOW, EINVAL, EWRONGTYPE; no child
// starts.
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

func main() {
	in := attack.TryInput()
	sp := attack.Must(mandate.Lookup("spawner"))
	if in.Mode == "public" {
		// A child cleared for public data only asks for a grandchild
		// cleared for Alice's PII.
		pii := []string{"pii:alice"}
		_, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Clearance: &pii})
		attack.Rec("grandchild_clearance", err)
		attack.Finish()
		return
	}
	if in.Mode == "child" {
		attack.Finish()
		return
	}
	cb, _ := mandate.NewBlob([]byte(`{"mode":"child"}`))
	child := func(mod string, caps []abi.SpawnCap, f func(*abi.SpawnRequest)) error {
		r := abi.SpawnRequest{Module: mod, Caps: caps, Input: cb.Handle()}
		if f != nil {
			f(&r)
		}
		_, err := mandate.Spawn(sp, r)
		return err
	}
	pass := func(name, narrow string) []abi.SpawnCap {
		c := attack.Must(mandate.Lookup(name))
		return []abi.SpawnCap{{Handle: c.Handle(), Name: name, Narrow: json.RawMessage(narrow)}}
	}
	self := in.Self
	attack.Rec("web_paths", child(self, pass("web", `{"paths":["/"]}`), nil))
	attack.Rec("web_methods", child(self, pass("web", `{"methods":["DELETE"]}`), nil))
	attack.Rec("web_origin", child(self, pass("web", `{"origin":"`+in.Evil+`"}`), nil))
	attack.Rec("web_timeout", child(self, pass("web", `{"timeout":"1h"}`), nil))
	attack.Rec("card_budget", child(self, pass("card", `{"budget":"1000"}`), nil))
	attack.Rec("card_payees", child(self, pass("card", `{"payees":["evil.example"]}`), nil))
	attack.Rec("card_approval", child(self, pass("card", `{"approve_above":"500"}`), nil))
	attack.Rec("data_fields", child(self, pass("mydata", `{"fields":["*"]}`), nil))
	attack.Rec("data_ops", child(self, pass("mydata", `{"ops":["write"]}`), nil))
	attack.Rec("spawner_children", child(self, pass("spawner", `{"max_children":100}`), nil))
	attack.Rec("spawner_memory", child(self, pass("spawner", `{"max_memory":"1GiB"}`), nil))
	attack.Rec("declass_drop", child(self, pass("declass", `{"drop":["pii:alice","pii:bob"]}`), nil))
	attack.Rec("test_level", child(self, pass("test", `{"level":6}`), nil))
	attack.Rec("memory", child(self, nil, func(r *abi.SpawnRequest) { r.Memory = 1 << 30 }))
	attack.Rec("timeout", child(self, nil, func(r *abi.SpawnRequest) { r.Timeout = "1h" }))
	attack.Rec("module", child("sha256:"+zeros(), nil, nil))
	attack.Rec("cap_as_input", child(self, nil, func(r *abi.SpawnRequest) { r.Input = sp.Handle() }))
	// A spawn request naming its own principal: unknown fields are refused.
	_, err := spawnRaw(sp, `{"module":"`+self+`","principal":"bob"}`)
	attack.Rec("principal", err)
	// A public child may not raise its grandchild's clearance.
	pub := []string{}
	ib, _ := json.Marshal(map[string]string{"mode": "public", "self": self})
	inb, _ := mandate.NewBlob(ib)
	c, err := mandate.Spawn(sp, abi.SpawnRequest{Module: self, Input: inb.Handle(), Clearance: &pub,
		Caps: []abi.SpawnCap{{Handle: sp.Handle(), Name: "spawner"}}})
	attack.Rec("public_child", err)
	if err == nil {
		b, err := c.Wait()
		attack.Rec("public_child_wait", err)
		if rb, err := b.Bytes(); err == nil {
			var r map[string]string
			json.Unmarshal(rb, &r)
			for k, v := range r {
				attack.Set("public_child."+k, v)
			}
		}
	}
	attack.Finish()
}

func zeros() string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = '0'
	}
	return string(b)
}

//go:wasmimport mandate task_spawn
func taskSpawn(h uint32, req *byte, n uint32, out *uint32) uint32

var out uint32

func spawnRaw(sp mandate.Cap, req string) (uint32, error) {
	b := []byte(req)
	if e := taskSpawn(uint32(sp.Handle()), &b[0], uint32(len(b)), &out); e != 0 {
		return 0, &mandate.Error{Errno: abi.Errno(e)}
	}
	return out, nil
}
