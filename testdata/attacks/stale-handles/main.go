// Command stale-handles keeps handles after dropping them and uses them
// once the slot holds something else: a narrower capability replaced by a
// wider one, a blob by another blob, a child task by a new child, a root
// grant re-looked-up after its drop. A stale handle must be EBADHANDLE and
// never name the slot's next occupant (law 2: index + generation).
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

func main() {
	in := readInput()
	if in.Mode == "child" {
		mandate.SetResult([]byte("child"))
		return
	}
	web := must(mandate.Lookup("web"))
	narrow := must(web.Derive(`{"paths":["/api/narrow"],"methods":["GET"]}`))
	old := narrow.Handle()
	rec("drop_narrow", narrow.Drop())
	wide := must(web.Derive(`{}`)) // lands in the freed slot
	note("same_slot", boolStr(wide.Handle().Index() == old.Index()))
	stale := mandate.CapFromHandle(old)
	_, err := stale.Call("fetch", []byte(`{"method":"POST","url":"/api/stale"}`))
	rec("stale_call", err)
	_, err = stale.Derive(`{}`)
	rec("stale_derive", err)
	rec("stale_revoke", stale.Revoke())
	_, err = stale.Describe()
	rec("stale_describe", err)
	rec("stale_drop", stale.Drop())
	// The slot's new occupant was not revoked through the stale handle.
	_, err = wide.Call("fetch", []byte(`{"method":"GET","url":"/api/fresh"}`))
	rec("fresh_call", err)

	// Blobs.
	b1, _ := mandate.NewBlob([]byte("first"))
	bh := b1.Handle()
	rec("drop_blob", b1.Drop())
	b2, _ := mandate.NewBlob([]byte("second"))
	note("blob_same_slot", boolStr(b2.Handle().Index() == bh.Index()))
	_, err = mandate.BlobFromHandle(bh).Bytes()
	rec("stale_blob_read", err)
	_, err = mandate.BlobFromHandle(bh).Len()
	rec("stale_blob_len", err)
	rec("stale_blob_result", mandate.SetResultBlob(mandate.BlobFromHandle(bh)))

	// Tasks.
	sp := must(mandate.Lookup("spawner"))
	c1, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: must2(mandate.NewBlob([]byte(`{"mode":"child"}`)))})
	rec("spawn", err)
	c1.Wait()
	th := c1.Handle()
	rec("drop_task", c1.Drop())
	c2, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: must2(mandate.NewBlob([]byte(`{"mode":"child"}`)))})
	rec("spawn2", err)
	c2.Wait()
	_, err = taskFrom(th).Wait()
	rec("stale_task_wait", err)
	rec("stale_task_kill", taskFrom(th).Kill())

	// A root grant, dropped, is not found again.
	card := must(mandate.Lookup("card"))
	rec("drop_root", card.Drop())
	_, err = mandate.Lookup("card")
	rec("lookup_dropped", err)
	_, err = card.Call("charge", []byte(`{"payee":"airline.example","amount":"10","currency":"USD"}`))
	rec("stale_root_charge", err)
	finish()
}

func must2(b mandate.Blob, err error) abi.Handle {
	if err != nil {
		panic(err)
	}
	return b.Handle()
}

// taskFrom makes a Task from a raw handle through a spawn-free path: the
// SDK has no constructor, so it goes through the raw host calls.
func taskFrom(h abi.Handle) rawTask { return rawTask(h) }

type rawTask abi.Handle

//go:wasmimport mandate task_wait
func taskWait(h uint32, out *uint32) uint32

//go:wasmimport mandate task_kill
func taskKill(h uint32) uint32

var out uint32

func (t rawTask) Wait() (uint32, error) { return out, errno(taskWait(uint32(t), &out)) }
func (t rawTask) Kill() error           { return errno(taskKill(uint32(t))) }

func errno(e uint32) error {
	if e == 0 {
		return nil
	}
	return &mandate.Error{Errno: abi.Errno(e)}
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
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
