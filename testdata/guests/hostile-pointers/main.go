// Command hostile-pointers calls the host functions directly with
// pointers and lengths outside its memory, lengths that overflow 32 bits
// when added to their pointers, and out pointers past the end. Each must
// get EFAULT, ELIMIT or EINVAL, never a kernel crash. It reports the errnos
// as its JSON result.
package main

import (
	"encoding/json"
	"unsafe"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

//go:wasmimport mandate cap_lookup
func capLookup(namePtr, nameLen, outPtr uint32) uint32

//go:wasmimport mandate cap_call
func capCall(h, opPtr, opLen, argPtr, argLen, outPtr uint32) uint32

//go:wasmimport mandate cap_derive
func capDerive(h, reqPtr, reqLen, outPtr uint32) uint32

//go:wasmimport mandate blob_create
func blobCreate(ptr, n, outPtr uint32) uint32

//go:wasmimport mandate blob_read
func blobRead(h, offset, bufPtr, bufLen, outPtr uint32) uint32

//go:wasmimport mandate blob_len
func blobLen(h, outPtr uint32) uint32

//go:wasmimport mandate last_error
func lastError(bufPtr, bufLen, outPtr uint32) uint32

var (
	name = []byte("test")
	op   = []byte("noop")
	out  uint32
)

func addr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(&b[0]))) }

func main() {
	res := map[string]string{}
	rec := func(k string, e uint32) { res[k] = abi.Errno(e).String() }
	outp := uint32(uintptr(unsafe.Pointer(&out)))
	const top = 0xffffffff

	rec("lookup_ok", capLookup(addr(name), uint32(len(name)), outp))
	h := out
	rec("lookup_name_oob", capLookup(top-2, 4, outp))
	rec("lookup_name_huge", capLookup(addr(name), top, outp))
	rec("lookup_out_oob", capLookup(addr(name), uint32(len(name)), top-1))
	rec("call_op_oob", capCall(h, top-3, 4, 0, 0, outp))
	rec("call_op_wrap", capCall(h, top, 2, 0, 0, outp))
	rec("call_args_wrap", capCall(h, addr(op), 4, 0x10, top, outp))
	rec("call_args_oob", capCall(h, addr(op), 4, 0x7ffffff0, 0x100, outp))
	rec("call_out_oob", capCall(h, addr(op), 4, 0, 0, top-2))
	rec("call_ok", capCall(h, addr(op), 4, 0, 0, outp))
	rec("derive_req_oob", capDerive(h, 0x7fff0000, 0x100000, outp))
	rec("derive_req_huge", capDerive(h, 0, 0x7fffffff, outp))
	rec("blob_create_wrap", blobCreate(top-10, 100, outp))
	rec("blob_create_huge", blobCreate(0, 0x7fffffff, outp))
	b, _ := mandate.NewBlob([]byte("hello"))
	rec("blob_read_buf_oob", blobRead(uint32(b.Handle()), 0, top-1, 10, outp))
	rec("blob_read_out_oob", blobRead(uint32(b.Handle()), 0, addr(name), 4, top))
	rec("blob_read_offset", blobRead(uint32(b.Handle()), top, addr(name), 4, outp))
	rec("blob_len_out_oob", blobLen(uint32(b.Handle()), top))
	rec("last_error_oob", lastError(top-5, 100, outp))

	buf, _ := json.Marshal(res)
	mandate.SetResult(buf)
}
