// Command result-big returns a large result through a child (issue 24):
// as "parent" it spawns its own module (Self) as a "child" that sets a
// result of Size bytes, waits for it, and makes the child's result its
// own: by handle, or, with Read, by reading it into its memory and setting
// a copy.
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

type input struct {
	Mode string `json:"mode"` // "parent" or "child"
	Self string `json:"self"` // this module's digest
	Size int    `json:"size"` // the child's result, in bytes
	Read bool   `json:"read"` // the parent reads the result and sets a copy
}

func main() {
	raw, _ := mandate.InputBytes()
	var in input
	if err := json.Unmarshal(raw, &in); err != nil {
		panic(err)
	}
	if in.Mode == "child" {
		b := make([]byte, in.Size)
		for i := range b {
			b[i] = 'a' + byte(i%26)
		}
		if err := mandate.SetResult(b); err != nil {
			panic(err)
		}
		return
	}
	sp, err := mandate.Lookup("spawner")
	if err != nil {
		panic(err)
	}
	req, _ := json.Marshal(input{Mode: "child", Size: in.Size})
	msg, err := mandate.NewBlob(req)
	if err != nil {
		panic(err)
	}
	child, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: msg.Handle()})
	if err != nil {
		panic(err)
	}
	res, err := child.Wait()
	if err != nil {
		panic(err)
	}
	if !in.Read {
		if err := mandate.SetResultBlob(res); err != nil {
			panic(err)
		}
		return
	}
	b, err := res.Bytes()
	if err != nil {
		panic(err)
	}
	res.Drop()
	if err := mandate.SetResult(b); err != nil {
		panic(err)
	}
}
