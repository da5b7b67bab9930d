// Command recycled-handles churns one table slot through every generation
// (create a blob, drop it, again), hoping the generation wraps and an old
// handle names a new entry. The kernel retires a slot at its last
// generation instead of reusing it (law 2): no handle ever repeats, and
// the first handle stays dead.
package main

import (
	"strconv"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

//go:wasmimport mandate blob_create
func blobCreate(p *byte, n uint32, out *uint32) uint32

//go:wasmimport mandate handle_drop
func handleDrop(h uint32) uint32

//go:wasmimport mandate blob_len
func blobLen(h uint32, out *uint32) uint32

var out uint32

func main() {
	attack.ReadInput()
	b := []byte("x")
	if e := blobCreate(&b[0], 1, &out); e != 0 {
		panic(e)
	}
	first := abi.Handle(out)
	handleDrop(uint32(first))
	slot := first.Index()
	iters, aliased, moved := 0, 0, 0
	var last abi.Handle
	for iters < abi.MaxGen+16 {
		if e := blobCreate(&b[0], 1, &out); e != 0 {
			attack.Set("create", abi.Errno(e).String())
			break
		}
		h := abi.Handle(out)
		iters++
		if h == first {
			aliased++
		}
		if h.Index() != slot {
			moved++ // the slot was retired: a fresh one is used
			last = h
			break
		}
		last = h
		handleDrop(uint32(h))
	}
	attack.Note("iterations", strconv.Itoa(iters))
	attack.Note("aliased", strconv.Itoa(aliased))
	attack.Note("moved", strconv.Itoa(moved))
	attack.Note("last_gen", strconv.Itoa(int(last.Gen())))
	attack.Set("first_after", abi.Errno(blobLen(uint32(first), &out)).String())
	// Every generation of the retired slot is dead.
	dead := abi.EBADHANDLE
	for gen := uint32(0); gen <= abi.MaxGen; gen += 4099 {
		if e := abi.Errno(blobLen(uint32(abi.MakeHandle(slot, gen)), &out)); e != abi.EBADHANDLE {
			dead = e
		}
	}
	attack.Set("retired_slot", dead.String())
	if aliased == 0 {
		attack.Set("alias", "ENONE")
	} else {
		attack.Set("alias", "ALIASED")
	}
	attack.Finish()
}
