// Command length-overflow passes lengths that overflow: ptr+len wrapping
// past 2^32, lengths of 4 GiB, ranges that end one byte past memory,
// lengths above each call's limit, and a read buffer that wraps. Limits are
// checked before ranges, and ranges in 64-bit arithmetic (law 10): ELIMIT
// or EFAULT, no effect, no crash.
package main

import (
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
	attack.ReadInput()
	web := uint32(attack.Must(mandate.Lookup("web")).Handle())
	name := []byte("web")
	fetch := []byte("fetch")
	get := []byte(`{"method":"POST","url":"/api/overflow"}`)

	r("lookup_len_wrap", capLookup(addr(name), top, outp()))
	r("lookup_len_limit", capLookup(addr(name), abi.MaxNameLen+1, outp()))
	r("op_len_wrap", capCall(web, addr(fetch), top-addr(fetch)+2, addr(get), uint32(len(get)), outp()))
	r("op_len_limit", capCall(web, addr(fetch), abi.MaxOpLen+1, addr(get), uint32(len(get)), outp()))
	r("args_len_wrap", capCall(web, addr(fetch), 5, addr(get), top-addr(get)+1, outp()))
	r("args_len_4g", capCall(web, addr(fetch), 5, 0, top, outp()))
	big := make([]byte, abi.MaxArgLen+1)
	copy(big, get)
	r("args_len_limit", capCall(web, addr(fetch), 5, addr(big), uint32(len(big)), outp()))
	r("derive_len_wrap", capDerive(web, 0x10, top-0xf, outp()))
	r("blob_create_wrap", blobCreate(top-10, 20, outp()))
	r("blob_create_limit", blobCreate(0, abi.MaxBlobLen+1, outp()))
	r("blob_create_past_end", blobCreate(0x3fff_fff0, 0x11, outp()))
	b, _ := mandate.NewBlob([]byte("hello, world"))
	buf := make([]byte, 16)
	r("read_buf_wrap", blobRead(uint32(b.Handle()), 0, addr(buf), top-addr(buf)+1, outp()))
	r("read_offset_past_end", blobRead(uint32(b.Handle()), 13, addr(buf), 16, outp()))
	r("read_offset_4g", blobRead(uint32(b.Handle()), top, addr(buf), 16, outp()))
	r("last_error_wrap", lastError(addr(buf), top, outp()))
	r("spawn_len_wrap", taskSpawn(uint32(attack.Must(mandate.Lookup("spawner")).Handle()), addr(buf), top-addr(buf)+1, outp()))
	// Good lengths still work.
	r("read_ok", blobRead(uint32(b.Handle()), 7, addr(buf), 16, outp()))
	attack.Note("read", string(buf[:out]))
	attack.Finish()
}
