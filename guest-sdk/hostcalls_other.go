//go:build !wasip1

package mandate

import (
	"unsafe"

	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// Outside a Mandate guest there is no kernel: every call fails with
// ENOTSUP, so packages that import the SDK still build and test on the
// host.

func capLookup(name unsafe.Pointer, nameLen uint32, out *uint32) abi.Errno { return abi.ENOTSUP }
func capCall(h uint32, op unsafe.Pointer, opLen uint32, arg unsafe.Pointer, argLen uint32, out *uint32) abi.Errno {
	return abi.ENOTSUP
}
func capDerive(h uint32, req unsafe.Pointer, reqLen uint32, out *uint32) abi.Errno {
	return abi.ENOTSUP
}
func capRevoke(h uint32) abi.Errno                                    { return abi.ENOTSUP }
func capDescribe(h uint32, out *uint32) abi.Errno                     { return abi.ENOTSUP }
func handleDrop(h uint32) abi.Errno                                   { return abi.ENOTSUP }
func blobCreate(data unsafe.Pointer, n uint32, out *uint32) abi.Errno { return abi.ENOTSUP }
func blobLen(h uint32, out *uint32) abi.Errno                         { return abi.ENOTSUP }
func blobRead(h, offset uint32, buf unsafe.Pointer, bufLen uint32, out *uint32) abi.Errno {
	return abi.ENOTSUP
}
func taskInput(out *uint32) abi.Errno                                    { return abi.ENOTSUP }
func taskResult(h uint32) abi.Errno                                      { return abi.ENOTSUP }
func lastError(buf unsafe.Pointer, bufLen uint32, out *uint32) abi.Errno { return abi.ENOTSUP }
func taskSpawn(h uint32, req unsafe.Pointer, reqLen uint32, out *uint32) abi.Errno {
	return abi.ENOTSUP
}
func taskWait(h uint32, out *uint32) abi.Errno { return abi.ENOTSUP }
func taskKill(h uint32) abi.Errno              { return abi.ENOTSUP }

func planSubmit(req unsafe.Pointer, reqLen uint32) abi.Errno { return abi.ENOTSUP }
func blobPart(h uint32, path unsafe.Pointer, pathLen uint32, pattern unsafe.Pointer, patternLen uint32, out *uint32) abi.Errno {
	return abi.ENOTSUP
}
