// Command foreign-handles uses another task's handles. The parent spawns
// a copy of itself with no capabilities and tells it, in its input, the
// handle values of every capability and blob the parent holds; the child
// tries each of them, then reports its own handles, which the parent tries
// in turn. Handles are task-local (law 2): every try is EBADHANDLE.
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

type childInput struct {
	Mode    string                `json:"mode"`
	Handles map[string]abi.Handle `json:"handles"`
}

func main() {
	raw, err := mandate.InputBytes()
	if err != nil {
		panic(err)
	}
	var ci childInput
	json.Unmarshal(raw, &ci)
	if ci.Mode == "child" {
		child(ci.Handles)
		return
	}
	var in attack.Input
	json.Unmarshal(raw, &in)
	mine := map[string]abi.Handle{}
	for _, n := range []string{"web", "vault", "mydata", "card", "spawner", "declass", "test"} {
		mine[n] = attack.Must(mandate.Lookup(n)).Handle()
	}
	secret, _ := mandate.NewBlob([]byte("parent-only"))
	mine["blob"] = secret.Handle()
	ib, _ := json.Marshal(childInput{Mode: "child", Handles: mine})
	inBlob, _ := mandate.NewBlob(ib)
	sp := attack.Must(mandate.Lookup("spawner"))
	c, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: inBlob.Handle()})
	attack.Rec("spawn", err)
	rb, err := c.Wait()
	attack.Rec("wait", err)
	b, err := rb.Bytes()
	if err != nil {
		panic(err)
	}
	var cr map[string]string
	json.Unmarshal(b, &cr)
	for k, v := range cr {
		attack.Set("child."+k, v)
	}
	// The child's own handles, tried here (skipping any value that is
	// also one of ours: that one names our own entry, not the child's).
	var theirs map[string]abi.Handle
	json.Unmarshal([]byte(cr["#handles"]), &theirs)
	attack.Delete("child.#handles")
	for k, h := range theirs {
		if isMine(mine, h) {
			attack.Note("collision."+k, "skipped")
			continue
		}
		_, err := mandate.BlobFromHandle(h).Bytes()
		attack.Rec("parent_reads_child_"+k, err)
	}
	attack.Finish()
}

func isMine(m map[string]abi.Handle, h abi.Handle) bool {
	for _, v := range m {
		if v == h {
			return true
		}
	}
	return false
}

func child(parent map[string]abi.Handle) {
	// Drop the input so its slot's generation moves on: nothing here is
	// left that a parent's handle value could name by coincidence.
	in, _ := mandate.Input()
	in.Drop()
	fetch := []byte(`{"method":"GET","url":"/api/foreign"}`)
	for k, h := range parent {
		c := mandate.CapFromHandle(h)
		if k == "blob" {
			_, err := mandate.BlobFromHandle(h).Bytes()
			attack.Rec("read_"+k, err)
			continue
		}
		_, err := c.Call("fetch", fetch)
		attack.Rec("call_"+k, err)
		_, err = c.Derive(`{}`)
		attack.Rec("derive_"+k, err)
		attack.Rec("revoke_"+k, c.Revoke())
	}
	b, _ := mandate.NewBlob([]byte("child-only"))
	hs, _ := json.Marshal(map[string]abi.Handle{"blob": b.Handle()})
	attack.Note("handles", string(hs))
	attack.Finish()
}
