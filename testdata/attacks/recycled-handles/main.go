// Command recycled-handles churns one table slot through every generation
// (create a blob, drop it, again), hoping the generation wraps and an old
// handle names a new entry. The kernel retires a slot at its last
// generation instead of reusing it (law 2): no handle ever repeats, and
// the first handle stays dead.
package main

import (
	"encoding/json"
	"strconv"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

//go:wasmimport mandate blob_create
func blobCreate(p *byte, n uint32, out *uint32) uint32

//go:wasmimport mandate handle_drop
func handleDrop(h uint32) uint32

//go:wasmimport mandate blob_len
func blobLen(h uint32, out *uint32) uint32

var out uint32

func main() {
	readInput()
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
			res["create"] = abi.Errno(e).String()
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
	note("iterations", strconv.Itoa(iters))
	note("aliased", strconv.Itoa(aliased))
	note("moved", strconv.Itoa(moved))
	note("last_gen", strconv.Itoa(int(last.Gen())))
	res["first_after"] = abi.Errno(blobLen(uint32(first), &out)).String()
	// Every generation of the retired slot is dead.
	dead := abi.EBADHANDLE
	for gen := uint32(0); gen <= abi.MaxGen; gen += 4099 {
		if e := abi.Errno(blobLen(uint32(abi.MakeHandle(slot, gen)), &out)); e != abi.EBADHANDLE {
			dead = e
		}
	}
	res["retired_slot"] = dead.String()
	if aliased == 0 {
		res["alias"] = "ENONE"
	} else {
		res["alias"] = "ALIASED"
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
