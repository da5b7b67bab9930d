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
)

func main() {
	in := readInput()
	web := must(mandate.Lookup("web"))
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
		rec("stop", stop)
		note("ok", strconv.Itoa(n))
		finish()
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
	rec("root", stop)
	note("root_ok", strconv.Itoa(n))
	d, err := web.Derive(`{"paths":["/api/flood"]}`)
	rec("derive", err)
	m := 0
	stop = nil
	for i := 0; i < 500 && err == nil; i++ {
		if _, err := d.Call("fetch", req); err != nil {
			stop = err
			break
		}
		m++
	}
	rec("derived", stop)
	note("derived_ok", strconv.Itoa(m))
	// A child's copy draws on the same allowance.
	sp := must(mandate.Lookup("spawner"))
	cin, _ := json.Marshal(map[string]string{"mode": "child"})
	cb, _ := mandate.NewBlob(cin)
	c, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: cb.Handle(),
		Caps: []abi.SpawnCap{{Handle: web.Handle(), Name: "web"}}})
	rec("spawn", err)
	if err == nil {
		b, err := c.Wait()
		rec("wait", err)
		if rb, err := b.Bytes(); err == nil {
			var r map[string]string
			json.Unmarshal(rb, &r)
			res["child.stop"] = r["stop"]
			note("child_ok", r["#ok"])
		}
	}
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
