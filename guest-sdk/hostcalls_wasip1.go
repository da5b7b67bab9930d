//go:build wasip1

package mandate

import (
	"unsafe"

	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// Raw host calls of the "mandate" import module. Pointers are offsets into
// linear memory. See ../ABI.md.

//go:wasmimport mandate cap_lookup
func capLookup(name unsafe.Pointer, nameLen uint32, out *uint32) abi.Errno

//go:wasmimport mandate cap_call
func capCall(h uint32, op unsafe.Pointer, opLen uint32, arg unsafe.Pointer, argLen uint32, out *uint32) abi.Errno

//go:wasmimport mandate cap_derive
func capDerive(h uint32, req unsafe.Pointer, reqLen uint32, out *uint32) abi.Errno

//go:wasmimport mandate cap_revoke
func capRevoke(h uint32) abi.Errno

//go:wasmimport mandate cap_describe
func capDescribe(h uint32, out *uint32) abi.Errno

//go:wasmimport mandate handle_drop
func handleDrop(h uint32) abi.Errno

//go:wasmimport mandate blob_create
func blobCreate(data unsafe.Pointer, n uint32, out *uint32) abi.Errno

//go:wasmimport mandate blob_len
func blobLen(h uint32, out *uint32) abi.Errno

//go:wasmimport mandate blob_read
func blobRead(h, offset uint32, buf unsafe.Pointer, bufLen uint32, out *uint32) abi.Errno

//go:wasmimport mandate task_input
func taskInput(out *uint32) abi.Errno

//go:wasmimport mandate task_result
func taskResult(h uint32) abi.Errno

//go:wasmimport mandate last_error
func lastError(buf unsafe.Pointer, bufLen uint32, out *uint32) abi.Errno

//go:wasmimport mandate task_spawn
func taskSpawn(h uint32, req unsafe.Pointer, reqLen uint32, out *uint32) abi.Errno

//go:wasmimport mandate task_wait
func taskWait(h uint32, out *uint32) abi.Errno

//go:wasmimport mandate task_kill
func taskKill(h uint32) abi.Errno

//go:wasmimport mandate plan_submit
func planSubmit(req unsafe.Pointer, reqLen uint32) abi.Errno

//go:wasmimport mandate blob_part
func blobPart(h uint32, path unsafe.Pointer, pathLen uint32, pattern unsafe.Pointer, patternLen uint32, out *uint32) abi.Errno
