//go:build wasip1

package raw

import (
	"unsafe"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

//go:wasmimport mandate cap_lookup
func CapLookup(namePtr, nameLen, outPtr uint32) uint32

//go:wasmimport mandate cap_call
func CapCall(h, opPtr, opLen, argPtr, argLen, outPtr uint32) uint32

//go:wasmimport mandate cap_derive
func CapDerive(h, reqPtr, reqLen, outPtr uint32) uint32

//go:wasmimport mandate cap_describe
func CapDescribe(h, outPtr uint32) uint32

//go:wasmimport mandate blob_create
func BlobCreate(ptr, n, outPtr uint32) uint32

//go:wasmimport mandate blob_len
func BlobLen(h, outPtr uint32) uint32

//go:wasmimport mandate blob_read
func BlobRead(h, offset, bufPtr, bufLen, outPtr uint32) uint32

//go:wasmimport mandate task_input
func TaskInput(outPtr uint32) uint32

//go:wasmimport mandate last_error
func LastError(bufPtr, bufLen, outPtr uint32) uint32

//go:wasmimport mandate task_spawn
func TaskSpawn(h, reqPtr, reqLen, outPtr uint32) uint32

//go:wasmimport mandate task_wait
func TaskWait(h, outPtr uint32) uint32

// Top is the last address of a 32-bit memory.
const Top = 0xffffffff

var out uint32

// Addr is the address of b's first byte.
func Addr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(&b[0]))) }

// Out is a valid out pointer (a uint32 in the guest's memory).
func Out() uint32 { return uint32(uintptr(unsafe.Pointer(&out))) }

// OutValue is what the last call wrote through Out.
func OutValue() uint32 { return out }

// Rec records attempt k's errno in the attack report.
func Rec(k string, e uint32) { attack.Set(k, abi.Errno(e).String()) }
