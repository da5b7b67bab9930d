// Command oob-pointers hands every host call pointers outside its linear
// memory: names, ops, arguments, buffers and, above all, out pointers on
// calls that would have an effect (a fetch, a charge, a derive, a spawn).
// Every range is checked before anything happens (law 10, EFAULT): the
// servers see no request, the provider no charge, the graph no new
// capability or task.
package main

import (
	"encoding/json"
	"unsafe"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

// Raw host calls: every pointer is a plain uint32 the guest chooses.

//go:wasmimport mandate cap_lookup
func capLookup(namePtr, nameLen, outPtr uint32) uint32

//go:wasmimport mandate cap_call
func capCall(h, opPtr, opLen, argPtr, argLen, outPtr uint32) uint32

//go:wasmimport mandate cap_derive
func capDerive(h, reqPtr, reqLen, outPtr uint32) uint32

//go:wasmimport mandate cap_describe
func capDescribe(h, outPtr uint32) uint32

//go:wasmimport mandate blob_create
func blobCreate(ptr, n, outPtr uint32) uint32

//go:wasmimport mandate blob_len
func blobLen(h, outPtr uint32) uint32

//go:wasmimport mandate blob_read
func blobRead(h, offset, bufPtr, bufLen, outPtr uint32) uint32

//go:wasmimport mandate task_input
func taskInput(outPtr uint32) uint32

//go:wasmimport mandate last_error
func lastError(bufPtr, bufLen, outPtr uint32) uint32

//go:wasmimport mandate task_spawn
func taskSpawn(h, reqPtr, reqLen, outPtr uint32) uint32

//go:wasmimport mandate task_wait
func taskWait(h, outPtr uint32) uint32

var out uint32

func addr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(&b[0]))) }

func outp() uint32 { return uint32(uintptr(unsafe.Pointer(&out))) }

func r(k string, e uint32) { attack.Set(k, abi.Errno(e).String()) }

const top = 0xffffffff

func main() {
	in := attack.ReadInput()
	web := uint32(attack.Must(mandate.Lookup("web")).Handle())
	card := uint32(attack.Must(mandate.Lookup("card")).Handle())
	sp := uint32(attack.Must(mandate.Lookup("spawner")).Handle())
	name := []byte("web")
	fetch := []byte("fetch")
	get := []byte(`{"method":"POST","url":"/api/oob-effect"}`)
	charge := []byte(`{"payee":"airline.example","amount":"10.00","currency":"USD","idempotency_key":"oob"}`)
	chargeOp := []byte("charge")
	derive := []byte(`{"paths":["/api/oob"]}`)
	spawn, _ := json.Marshal(abi.SpawnRequest{Module: in.Self, Timeout: "1s"})

	r("lookup_name_oob", capLookup(0x7fff_fff0, 3, outp()))
	r("lookup_out_oob", capLookup(addr(name), 3, top-1))
	r("call_op_oob", capCall(web, top-4, 5, addr(get), uint32(len(get)), outp()))
	r("call_args_oob", capCall(web, addr(fetch), 5, 0x7000_0000, 64, outp()))
	// Effects whose result cannot be written: refused before they happen.
	r("fetch_out_oob", capCall(web, addr(fetch), 5, addr(get), uint32(len(get)), top-2))
	r("fetch_out_unaligned_end", capCall(web, addr(fetch), 5, addr(get), uint32(len(get)), 0x7fff_fffe))
	r("charge_out_oob", capCall(card, addr(chargeOp), 6, addr(charge), uint32(len(charge)), top))
	r("derive_out_oob", capDerive(web, addr(derive), uint32(len(derive)), top-3))
	r("spawn_out_oob", taskSpawn(sp, addr(spawn), uint32(len(spawn)), top-3))
	r("spawn_req_oob", taskSpawn(sp, 0x7fff_0000, 100, outp()))
	r("describe_out_oob", capDescribe(web, top))
	r("input_out_oob", taskInput(top-1))
	r("blob_create_oob", blobCreate(0x7fff_ff00, 0x200, outp()))
	b, _ := mandate.NewBlob([]byte("hello"))
	r("blob_read_buf_oob", blobRead(uint32(b.Handle()), 0, 0x7fff_fff0, 16, outp()))
	r("blob_read_out_oob", blobRead(uint32(b.Handle()), 0, addr(name), 3, top))
	r("blob_len_out_oob", blobLen(uint32(b.Handle()), top-2))
	r("last_error_oob", lastError(top-5, 100, outp()))
	r("wait_out_oob", taskWait(uint32(b.Handle()), top))
	// The same calls with good pointers work.
	r("fetch_ok", capCall(web, addr(fetch), 5, addr(get), uint32(len(get)), outp()))
	attack.Finish()
}
