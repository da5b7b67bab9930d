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
)

func main() {
	raw, _ := mandate.InputBytes()
	var in input
	json.Unmarshal(raw, &in)
	switch in.Mode {
	case "child":
		web := must(mandate.Lookup("web"))
		_, err := web.Call("fetch", []byte(`{"method":"GET","url":"/api/launder-child"}`))
		rec("fetch", err)
		b, _ := mandate.NewBlob([]byte("fresh"))
		_, err = web.Call("fetch", []byte(`{"method":"POST","url":"/api/echo","body_blob":`+itoa(int(b.Handle()))+`}`))
		rec("fresh_blob", err)
		finish()
		return
	}
	sp := must(mandate.Lookup("spawner"))
	web := must(mandate.Lookup("web"))
	mydata := must(mandate.Lookup("mydata"))
	cin, _ := mandate.NewBlob([]byte(`{"mode":"child"}`))
	pb, _ := mydata.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`))
	pb.Bytes()
	public := []string{}
	_, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: cin.Handle(), Clearance: &public})
	rec("public_child", err)
	other := []string{"pii:bob"}
	_, err = mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: cin.Handle(), Clearance: &other})
	rec("other_clearance_child", err)
	c, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: cin.Handle(),
		Caps: []abi.SpawnCap{{Handle: web.Handle(), Name: "web"}}})
	rec("tainted_child", err)
	if err == nil {
		b, err := c.Wait()
		rec("wait", err)
		if rb, err := b.Bytes(); err == nil {
			var r map[string]string
			json.Unmarshal(rb, &r)
			for k, v := range r {
				res["child."+k] = v
			}
		}
	}
	finish()
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
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
