// Command stale-handles keeps handles after dropping them and uses them
// once the slot holds something else: a narrower capability replaced by a
// wider one, a blob by another blob, a child task by a new child, a root
// grant re-looked-up after its drop. A stale handle must be EBADHANDLE and
// never name the slot's next occupant (law 2: index + generation).
package main

import (
	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

func main() {
	in := attack.ReadInput()
	if in.Mode == "child" {
		mandate.SetResult([]byte("child"))
		return
	}
	web := attack.Must(mandate.Lookup("web"))
	narrow := attack.Must(web.Derive(`{"paths":["/api/narrow"],"methods":["GET"]}`))
	old := narrow.Handle()
	attack.Rec("drop_narrow", narrow.Drop())
	wide := attack.Must(web.Derive(`{}`)) // lands in the freed slot
	attack.Note("same_slot", boolStr(wide.Handle().Index() == old.Index()))
	stale := mandate.CapFromHandle(old)
	_, err := stale.Call("fetch", []byte(`{"method":"POST","url":"/api/stale"}`))
	attack.Rec("stale_call", err)
	_, err = stale.Derive(`{}`)
	attack.Rec("stale_derive", err)
	attack.Rec("stale_revoke", stale.Revoke())
	_, err = stale.Describe()
	attack.Rec("stale_describe", err)
	attack.Rec("stale_drop", stale.Drop())
	// The slot's new occupant was not revoked through the stale handle.
	_, err = wide.Call("fetch", []byte(`{"method":"GET","url":"/api/fresh"}`))
	attack.Rec("fresh_call", err)

	// Blobs.
	b1, _ := mandate.NewBlob([]byte("first"))
	bh := b1.Handle()
	attack.Rec("drop_blob", b1.Drop())
	b2, _ := mandate.NewBlob([]byte("second"))
	attack.Note("blob_same_slot", boolStr(b2.Handle().Index() == bh.Index()))
	_, err = mandate.BlobFromHandle(bh).Bytes()
	attack.Rec("stale_blob_read", err)
	_, err = mandate.BlobFromHandle(bh).Len()
	attack.Rec("stale_blob_len", err)
	attack.Rec("stale_blob_result", mandate.SetResultBlob(mandate.BlobFromHandle(bh)))

	// Tasks.
	sp := attack.Must(mandate.Lookup("spawner"))
	c1, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: must2(mandate.NewBlob([]byte(`{"mode":"child"}`)))})
	attack.Rec("spawn", err)
	c1.Wait()
	th := c1.Handle()
	attack.Rec("drop_task", c1.Drop())
	c2, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: must2(mandate.NewBlob([]byte(`{"mode":"child"}`)))})
	attack.Rec("spawn2", err)
	c2.Wait()
	_, err = taskFrom(th).Wait()
	attack.Rec("stale_task_wait", err)
	attack.Rec("stale_task_kill", taskFrom(th).Kill())

	// A root grant, dropped, is not found again.
	card := attack.Must(mandate.Lookup("card"))
	attack.Rec("drop_root", card.Drop())
	_, err = mandate.Lookup("card")
	attack.Rec("lookup_dropped", err)
	_, err = card.Call("charge", []byte(`{"payee":"airline.example","amount":"10","currency":"USD"}`))
	attack.Rec("stale_root_charge", err)
	attack.Finish()
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
