//go:build wasmtime

package wasmtime

// Host calls: every host function (WASI's and those registered through
// Host) is a wasmtime "unchecked" function, reaching Go through
// mandateHostCall.
//
// Why not wasmtime-go's Linker.FuncNew? Its trampoline makes a call into C
// per argument and per result, allocates a Caller and a []Val (and boxes
// every argument of 256 or more: a guest pointer always is), and finds the
// store's data behind a process-wide lock; a host function then needs more
// calls into C for the guest's memory. On a capability call that was most
// of the cost (BENCHMARKS.md, "Task lifecycle"). Here a call is one
// crossing from C into Go, with the arguments read from wasmtime's raw
// array in place, the function and the run found in lock-free indexes
// (hostFuncs, runs: index.go), the guest memory's view read by the C side
// before it calls into Go (mandate_mem_tab in hostcall_c.go; view.go's one
// call into C only for a run whose memory is not there yet), and nothing
// allocated.

/*
#include <stddef.h>
#include <stdint.h>
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"unsafe"

	wt "github.com/bytecodealliance/wasmtime-go/v39"
)

// rawVal is a wasmtime_val_raw_t: a value stored little-endian from its
// first byte, whatever the host's byte order.
type rawVal [16]byte

func (v *rawVal) u64() uint64     { return binary.LittleEndian.Uint64(v[:8]) }
func (v *rawVal) setI32(x uint32) { binary.LittleEndian.PutUint64(v[:8], uint64(x)) }
func (v *rawVal) u32() uint32     { return binary.LittleEndian.Uint32(v[:4]) }

// hostFunc is one host function as mandateHostCall finds it (through a
// cgo.Handle, the env wasmtime passes back).
type hostFunc struct {
	// what names the function in the trap of a panic.
	what string
	// call runs the function for r: vals holds its arguments (as many as
	// its type has) and receives its results in place; caller is the
	// wasmtime_caller_t, valid during the call. A non-nil result is a
	// trap (newTrap) that ends the run.
	call func(r *run, caller unsafe.Pointer, vals []rawVal) (trap unsafe.Pointer)
}

// runs maps the data of each store running a guest (storeData) to its
// run, for host calls. wasmtime-go's own map, behind Caller.Data, takes a
// process-wide lock and two calls into C. A store's data is wasmtime-go's
// index of the store (a slab's: small, reused once the store is gone), so
// runs is an index by it; runsOver holds a run whose store's data is not
// below maxIndex, should wasmtime-go ever give such data.
var (
	runs     index[run]
	runsOver sync.Map
)

// register makes r the run of store's host calls until the returned
// function is called, which must be before the store is closed:
// wasmtime-go gives a closed store's data to a later store.
func register(store *wt.Store, r *run) (unregister func()) {
	key := storeData(store)
	r.storeKey, r.storeCtx = key, storeContext(store)
	if runs.set(key, r) {
		return func() {
			r.forgetMemory()
			runs.set(key, nil)
		}
	}
	runsOver.Store(key, r)
	return func() { runsOver.Delete(key) }
}

// memSlotsMu serializes the writes of mandate_mem_tab (hostcall_c.go).
var memSlotsMu sync.Mutex

// publishMemory puts the run's memory in mandate_mem_tab, for its host
// calls to be given their view of it by the C side (mandate_host_cb). Only
// for a store registered in runs (its data below maxIndex); a run whose
// memory is not there has its views read from Go (memoryView).
func (r *run) publishMemory() {
	if r.guestMem == nil || r.storeCtx == nil || r.storeKey >= maxIndex {
		return
	}
	memSlotsMu.Lock()
	r.published = setMemSlot(r.storeKey, r.storeCtx, r.guestMem)
	memSlotsMu.Unlock()
}

// forgetMemory takes the run's memory out of mandate_mem_tab, before its
// store is closed.
func (r *run) forgetMemory() {
	if !r.published {
		return
	}
	memSlotsMu.Lock()
	setMemSlot(r.storeKey, nil, nil)
	r.published = false
	memSlotsMu.Unlock()
}

// runOf is the run of the store whose data is data, or nil.
func runOf(data uintptr) *run {
	if r := runs.load(data); r != nil {
		return r
	}
	if data < maxIndex {
		return nil
	}
	v, ok := runsOver.Load(data)
	if !ok {
		return nil
	}
	return v.(*run)
}

// hostFuncs holds every defined host function by the env wasmtime passes
// back to mandateHostCall (define): an index rather than a cgo.Handle,
// whose Value is a sync.Map lookup.
var hostFuncs index[hostFunc]

// mandateHostCall is called by mandate_host_cb for every host call; base
// and len are the view of the caller's memory when viewed is 1 (the C side
// read it from mandate_mem_tab).
//
//export mandateHostCall
func mandateHostCall(env C.uintptr_t, caller, data, vals unsafe.Pointer, n C.size_t, base *C.uint8_t, len C.size_t, viewed C.int) unsafe.Pointer {
	f := hostFuncs.load(uintptr(env))
	if f == nil {
		// Defined functions stay until their engine is released, once
		// nothing runs.
		return newTrap("sandbox/wasmtime: call of a host function that is not defined")
	}
	r := runOf(uintptr(data))
	if r == nil {
		// Every store is registered before it instantiates anything.
		return newTrap("sandbox/wasmtime: host call " + f.what + " from a store with no run")
	}
	r.viewed = viewed != 0
	if r.viewed {
		r.view = nil
		if base != nil {
			r.view = unsafe.Slice((*byte)(unsafe.Pointer(base)), int(len))
		}
	}
	return f.invoke(r, caller, unsafe.Slice((*rawVal)(vals), int(n)))
}

// invoke calls f for r; a panic becomes a trap of r alone (it must not
// unwind through wasmtime's frames).
func (f *hostFunc) invoke(r *run, caller unsafe.Pointer, vals []rawVal) (trap unsafe.Pointer) {
	defer func() {
		if v := recover(); v != nil {
			trap = r.trap(fmt.Sprintf("%s panicked: %v", f.what, v))
		}
	}()
	return f.call(r, caller, vals)
}

// define defines module.name, of type sig, in e's linker as f. Its place
// in hostFuncs lives as long as the engine (release gives it back).
//
// Preconditions: e.mu is held, or e is not yet shared.
func (e *Engine) define(module, name string, sig funcSig, f *hostFunc) error {
	h, ok := hostFuncs.add(f)
	if !ok {
		return errors.New("too many host functions defined")
	}
	e.handles = append(e.handles, h)
	// The type is closed at once, not left to its finalizer: until then it
	// keeps the engine's pool of instance slots reserved after Close.
	ft := sig.funcType()
	defer ft.Close()
	return defineUnchecked(e.linker, module, name, ft, uintptr(h))
}
