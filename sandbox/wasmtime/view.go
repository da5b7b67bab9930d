//go:build wasmtime

package wasmtime

// A host call's view of the caller's memory, in one crossing into C.
//
// Through wasmtime-go, Memory.UnsafeData makes four calls into C (the
// caller's context twice, the base, the length) and looking the memory up
// by name (Caller.GetExport) allocates objects with finalizers. The
// memory's handle is looked up once per run (run.lookUpMemory) and
// published for the C side of host calls, which reads its base and length
// before calling into Go (hostcall_c.go); callerView reads them with one
// call into C for a host call the C side could not serve (one made during
// instantiation, before the lookup). A memory.grow may move the bytes, so
// they are never kept past the call. As in interrupt.go, the C API functions are declared by hand
// and weak, and the C values are read from the first fields of
// wasmtime-go's Caller and Memory (viewLayoutOK checks that, and New
// refuses to start if it is not so).

/*
#include <stddef.h>
#include <stdint.h>

typedef struct wasmtime_caller wasmtime_caller_t;
typedef struct wasmtime_context wasmtime_context_t;

// wasmtime_memory_t as wasmtime/extern.h (v39) defines it.
typedef struct mandate_memory {
	struct {
		uint64_t store_id;
		uint32_t private1;
	};
	uint32_t private2;
} mandate_memory_t;

extern wasmtime_context_t *wasmtime_caller_context(wasmtime_caller_t *) __attribute__((weak));
extern uint8_t *wasmtime_memory_data(const wasmtime_context_t *, const mandate_memory_t *) __attribute__((weak));
extern size_t wasmtime_memory_data_size(const wasmtime_context_t *, const mandate_memory_t *) __attribute__((weak));

typedef struct mandate_view {
	uint8_t *base; // the memory's first byte
	size_t len;    // the memory's length in bytes
} mandate_view_t;

// mandate_caller_view is mem's bytes as the host call from caller sees
// them. Returned by value: a Go variable passed to C by address would
// escape to the heap.
static mandate_view_t mandate_caller_view(void *caller, mandate_memory_t mem) {
	wasmtime_context_t *ctx = wasmtime_caller_context((wasmtime_caller_t *)caller);
	mandate_view_t v = {wasmtime_memory_data(ctx, &mem), wasmtime_memory_data_size(ctx, &mem)};
	return v;
}

static int mandate_view_linked(void) {
	return wasmtime_caller_context != NULL && wasmtime_memory_data != NULL &&
		wasmtime_memory_data_size != NULL;
}
*/
import "C"

import (
	"reflect"
	"unsafe"

	wt "github.com/bytecodealliance/wasmtime-go/v39"
)

// viewLayoutOK reports whether wasmtime.Caller is its C pointer alone and
// wasmtime.Memory is exactly a wasmtime_memory_t, as callerView
// assumes.
var viewLayoutOK = func() bool {
	ct := reflect.TypeFor[wt.Caller]()
	c, ok := ct.FieldByName("ptr")
	if !ok || c.Offset != 0 || c.Type.Kind() != reflect.Pointer || ct.Size() != unsafe.Sizeof(uintptr(0)) {
		return false
	}
	m := reflect.TypeFor[wt.Memory]()
	v, ok := m.FieldByName("val")
	return ok && v.Offset == 0 && m.Size() == C.sizeof_mandate_memory_t && v.Type.Size() == C.sizeof_mandate_memory_t
}()

// viewLinked reports whether the C API functions this file declares were
// linked in.
var viewLinked = C.mandate_view_linked() != 0

// callerView is the bytes of mem as the host call from caller (a
// wasmtime_caller_t) sees them, valid until the guest runs again.
func callerView(caller unsafe.Pointer, mem *wt.Memory) []byte {
	v := C.mandate_caller_view(caller, *(*C.mandate_memory_t)(unsafe.Pointer(mem)))
	if v.base == nil {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(v.base)), int(v.len))
}

// asCaller is the wasmtime-go Caller whose C pointer *p is: a Caller is
// that pointer alone (viewLayoutOK).
func asCaller(p *unsafe.Pointer) *wt.Caller { return (*wt.Caller)(unsafe.Pointer(p)) }
