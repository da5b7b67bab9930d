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
	var in input
	json.Unmarshal(raw, &in)
	mine := map[string]abi.Handle{}
	for _, n := range []string{"web", "vault", "mydata", "card", "spawner", "declass", "test"} {
		mine[n] = must(mandate.Lookup(n)).Handle()
	}
	secret, _ := mandate.NewBlob([]byte("parent-only"))
	mine["blob"] = secret.Handle()
	ib, _ := json.Marshal(childInput{Mode: "child", Handles: mine})
	inBlob, _ := mandate.NewBlob(ib)
	sp := must(mandate.Lookup("spawner"))
	c, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: inBlob.Handle()})
	rec("spawn", err)
	rb, err := c.Wait()
	rec("wait", err)
	b, err := rb.Bytes()
	if err != nil {
		panic(err)
	}
	var cr map[string]string
	json.Unmarshal(b, &cr)
	for k, v := range cr {
		res["child."+k] = v
	}
	// The child's own handles, tried here (skipping any value that is
	// also one of ours: that one names our own entry, not the child's).
	var theirs map[string]abi.Handle
	json.Unmarshal([]byte(cr["#handles"]), &theirs)
	delete(res, "child.#handles")
	for k, h := range theirs {
		if isMine(mine, h) {
			note("collision."+k, "skipped")
			continue
		}
		_, err := mandate.BlobFromHandle(h).Bytes()
		rec("parent_reads_child_"+k, err)
	}
	finish()
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
			rec("read_"+k, err)
			continue
		}
		_, err := c.Call("fetch", fetch)
		rec("call_"+k, err)
		_, err = c.Derive(`{}`)
		rec("derive_"+k, err)
		rec("revoke_"+k, c.Revoke())
	}
	b, _ := mandate.NewBlob([]byte("child-only"))
	hs, _ := json.Marshal(map[string]abi.Handle{"blob": b.Handle()})
	note("handles", string(hs))
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
