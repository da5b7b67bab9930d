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
)

func main() {
	raw, _ := mandate.InputBytes()
	var in input
	json.Unmarshal(raw, &in)
	sp := must(mandate.Lookup("spawner"))
	if in.Mode == "public" {
		// A child cleared for public data only asks for a grandchild
		// cleared for Alice's PII.
		pii := []string{"pii:alice"}
		_, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Clearance: &pii})
		rec("grandchild_clearance", err)
		finish()
		return
	}
	if in.Mode == "child" {
		finish()
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
		c := must(mandate.Lookup(name))
		return []abi.SpawnCap{{Handle: c.Handle(), Name: name, Narrow: json.RawMessage(narrow)}}
	}
	self := in.Self
	rec("web_paths", child(self, pass("web", `{"paths":["/"]}`), nil))
	rec("web_methods", child(self, pass("web", `{"methods":["DELETE"]}`), nil))
	rec("web_origin", child(self, pass("web", `{"origin":"`+in.Evil+`"}`), nil))
	rec("web_timeout", child(self, pass("web", `{"timeout":"1h"}`), nil))
	rec("card_budget", child(self, pass("card", `{"budget":"1000"}`), nil))
	rec("card_payees", child(self, pass("card", `{"payees":["evil.example"]}`), nil))
	rec("card_approval", child(self, pass("card", `{"approve_above":"500"}`), nil))
	rec("data_fields", child(self, pass("mydata", `{"fields":["*"]}`), nil))
	rec("data_ops", child(self, pass("mydata", `{"ops":["write"]}`), nil))
	rec("spawner_children", child(self, pass("spawner", `{"max_children":100}`), nil))
	rec("spawner_memory", child(self, pass("spawner", `{"max_memory":"1GiB"}`), nil))
	rec("declass_drop", child(self, pass("declass", `{"drop":["pii:alice","pii:bob"]}`), nil))
	rec("test_level", child(self, pass("test", `{"level":6}`), nil))
	rec("memory", child(self, nil, func(r *abi.SpawnRequest) { r.Memory = 1 << 30 }))
	rec("timeout", child(self, nil, func(r *abi.SpawnRequest) { r.Timeout = "1h" }))
	rec("module", child("sha256:"+zeros(), nil, nil))
	rec("cap_as_input", child(self, nil, func(r *abi.SpawnRequest) { r.Input = sp.Handle() }))
	// A spawn request naming its own principal: unknown fields are refused.
	_, err := spawnRaw(sp, `{"module":"`+self+`","principal":"bob"}`)
	rec("principal", err)
	// A public child may not raise its grandchild's clearance.
	pub := []string{}
	ib, _ := json.Marshal(map[string]string{"mode": "public", "self": self})
	inb, _ := mandate.NewBlob(ib)
	c, err := mandate.Spawn(sp, abi.SpawnRequest{Module: self, Input: inb.Handle(), Clearance: &pub,
		Caps: []abi.SpawnCap{{Handle: sp.Handle(), Name: "spawner"}}})
	rec("public_child", err)
	if err == nil {
		b, err := c.Wait()
		rec("public_child_wait", err)
		if rb, err := b.Bytes(); err == nil {
			var r map[string]string
			json.Unmarshal(rb, &r)
			for k, v := range r {
				res["public_child."+k] = v
			}
		}
	}
	finish()
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
