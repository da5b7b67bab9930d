// Command forged-handles invents handles: zero, all ones, a real handle's
// index with other generations, unused slots, and a spray of every small
// index and generation, on every host call that takes a handle. Each must
// be EBADHANDLE (law 2: handles are unforgeable), never another entry.
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

//go:wasmimport mandate cap_revoke
func capRevoke(h uint32) uint32

//go:wasmimport mandate blob_len
func blobLen(h uint32, out *uint32) uint32

//go:wasmimport mandate task_wait
func taskWait(h uint32, out *uint32) uint32

//go:wasmimport mandate task_kill
func taskKill(h uint32) uint32

//go:wasmimport mandate task_result
func taskResult(h uint32) uint32

//go:wasmimport mandate handle_drop
func handleDrop(h uint32) uint32

var out uint32

func main() {
	attack.ReadInput()
	web := attack.Must(mandate.Lookup("web"))
	h := web.Handle()
	real := map[abi.Handle]bool{}
	for _, n := range []string{"web", "vault", "mydata", "myplan", "card", "old", "spawner", "declass", "test", "transfer"} {
		if c, err := mandate.Lookup(n); err == nil {
			real[c.Handle()] = true
		}
	}
	fetch := []byte(`{"method":"GET","url":"/api/forged"}`)
	forged := map[string]abi.Handle{
		"zero":        0,
		"all_ones":    0xffffffff,
		"gen_zero":    abi.MakeHandle(h.Index(), 0),
		"next_gen":    abi.MakeHandle(h.Index(), h.Gen()+1),
		"max_gen":     abi.MakeHandle(h.Index(), abi.MaxGen),
		"unused_slot": abi.MakeHandle(1000, 1),
		"max_index":   abi.MakeHandle(4095, 1),
	}
	for name, f := range forged {
		_, err := mandate.CapFromHandle(f).Call("fetch", fetch)
		attack.Rec("call_"+name, err)
	}
	f := forged["next_gen"]
	_, err := mandate.CapFromHandle(f).Derive(`{}`)
	attack.Rec("derive", err)
	attack.Rec("revoke", errno(capRevoke(uint32(f))))
	_, err = mandate.CapFromHandle(f).Describe()
	attack.Rec("describe", err)
	attack.Rec("blob_len", errno(blobLen(uint32(f), &out)))
	_, err = mandate.BlobFromHandle(f).ReadAt(make([]byte, 8), 0)
	attack.Rec("blob_read", err)
	attack.Rec("task_wait", errno(taskWait(uint32(f), &out)))
	attack.Rec("task_kill", errno(taskKill(uint32(f))))
	attack.Rec("task_result", errno(taskResult(uint32(f))))
	attack.Rec("drop", errno(handleDrop(uint32(f))))
	_, err = mandate.Spawn(mandate.CapFromHandle(f), abi.SpawnRequest{Module: "sha256:00"})
	attack.Rec("spawn", err)

	// Spray small indexes and generations that name nothing here.
	worst, tried := abi.ESUCCESS, 0
	for idx := uint32(0); idx < 32; idx++ {
		for gen := uint32(0); gen < 3; gen++ {
			g := abi.MakeHandle(idx, gen)
			if real[g] {
				continue
			}
			tried++
			_, err := mandate.CapFromHandle(g).Call("fetch", fetch)
			if e := mandate.ErrnoOf(err); e != abi.EBADHANDLE && worst == abi.ESUCCESS {
				worst = e
			}
		}
	}
	if worst == abi.ESUCCESS {
		worst = abi.EBADHANDLE
	}
	attack.Set("spray", worst.String())
	attack.Note("spray_tried", itoa(tried))
	// The real handle still works after all that.
	_, err = web.Call("fetch", []byte(`{"method":"GET","url":"/api/real"}`))
	attack.Rec("real_after", err)
	attack.Finish()
}

func errno(e uint32) error {
	if e == 0 {
		return nil
	}
	return &mandate.Error{Errno: abi.Errno(e)}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
