//go:build wasmtime

package wasmtime

// The C half of host calls (hostcall.go): a wasmtime "unchecked" host
// function, whose arguments and results are raw 16-byte values in one
// array, calling the Go function mandateHostCall. As in interrupt.go, the
// C API functions are declared by hand (wasmtime v39's wasmtime/linker.h,
// func.h, trap.h, error.h) and weak.

/*
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct wasmtime_linker wasmtime_linker_t;
typedef struct wasmtime_caller wasmtime_caller_t;
typedef struct wasmtime_context wasmtime_context_t;
typedef struct wasmtime_store wasmtime_store_t;
typedef struct wasmtime_error wasmtime_error_t;
typedef struct wasm_functype_t wasm_functype_t;
typedef struct wasm_trap_t wasm_trap_t;
typedef struct mandate_byte_vec { size_t size; char *data; } mandate_byte_vec_t; // wasm_byte_vec_t

// wasmtime_val_raw_t: 16 bytes, values little-endian from the first byte.
typedef struct mandate_val_raw { uint8_t b[16]; } mandate_val_raw_t;

typedef wasm_trap_t *(*mandate_unchecked_cb)(void *env, wasmtime_caller_t *caller,
	mandate_val_raw_t *args_and_results, size_t num_args_and_results);

extern wasmtime_error_t *wasmtime_linker_define_func_unchecked(wasmtime_linker_t *linker,
	const char *module, size_t module_len, const char *name, size_t name_len,
	const wasm_functype_t *ty, mandate_unchecked_cb cb, void *data,
	void (*finalizer)(void *)) __attribute__((weak));
extern wasmtime_context_t *wasmtime_caller_context(wasmtime_caller_t *) __attribute__((weak));
extern wasmtime_context_t *wasmtime_store_context(wasmtime_store_t *) __attribute__((weak));
extern void *wasmtime_context_get_data(const wasmtime_context_t *) __attribute__((weak));
extern wasm_trap_t *wasmtime_trap_new(const char *msg, size_t len) __attribute__((weak));
extern void wasmtime_error_message(const wasmtime_error_t *, mandate_byte_vec_t *) __attribute__((weak));
extern void wasmtime_error_delete(wasmtime_error_t *) __attribute__((weak));
extern void wasm_byte_vec_delete(mandate_byte_vec_t *) __attribute__((weak));

// wasmtime_memory_t as wasmtime/extern.h (v39) defines it (view.go's
// mandate_memory_t, which this file cannot see).
typedef struct mandate_mem {
	struct {
		uint64_t store_id;
		uint32_t private1;
	};
	uint32_t private2;
} mandate_mem_t;

extern uint8_t *wasmtime_memory_data(const wasmtime_context_t *, const mandate_mem_t *) __attribute__((weak));
extern size_t wasmtime_memory_data_size(const wasmtime_context_t *, const mandate_mem_t *) __attribute__((weak));

// The memory of each running store, by the store's data (wasmtime-go's
// index of the store, small): what mandate_host_cb reads the caller's
// memory view with, so that a host call makes no call back into C for
// it. A slot holds the store's context, which a host call's must equal
// for the slot to be used, and the handle of its instance's memory "memory".
// Written by Go alone, under its lock (memSlots in hostcall.go), and read
// by host calls without one: the table is published whole, and an
// outgrown table is never freed, since a host call may still be reading it.
typedef struct mandate_mem_slot {
	void *ctx; // the store's wasmtime_context_t, NULL when the slot is free
	mandate_mem_t mem;
} mandate_mem_slot_t;

typedef struct mandate_mem_table {
	size_t n;
	mandate_mem_slot_t slots[];
} mandate_mem_table_t;

static mandate_mem_table_t *mandate_mem_tab;

// mandate_mem_set makes the slot i the store's whose context is ctx, with
// memory mem; a NULL ctx frees it. It returns 0 when memory for a larger
// table could not be had (the slot is then not set: host calls read the
// view from Go).
static int mandate_mem_set(size_t i, void *ctx, mandate_mem_t mem) {
	mandate_mem_table_t *t = __atomic_load_n(&mandate_mem_tab, __ATOMIC_ACQUIRE);
	if (t == NULL || i >= t->n) {
		if (ctx == NULL) {
			return 1;
		}
		size_t n = 64;
		while (n <= i) {
			n *= 2;
		}
		mandate_mem_table_t *g = calloc(1, sizeof(mandate_mem_table_t) + n * sizeof(mandate_mem_slot_t));
		if (g == NULL) {
			return 0;
		}
		g->n = n;
		if (t != NULL) {
			for (size_t j = 0; j < t->n; j++) {
				g->slots[j].mem = t->slots[j].mem;
				g->slots[j].ctx = __atomic_load_n(&t->slots[j].ctx, __ATOMIC_ACQUIRE);
			}
		}
		__atomic_store_n(&mandate_mem_tab, g, __ATOMIC_RELEASE);
		t = g;
	}
	if (ctx == NULL) {
		__atomic_store_n(&t->slots[i].ctx, NULL, __ATOMIC_RELEASE);
		return 1;
	}
	t->slots[i].mem = mem;
	__atomic_store_n(&t->slots[i].ctx, ctx, __ATOMIC_RELEASE);
	return 1;
}

// mandateHostCall is hostcall.go's.
extern void *mandateHostCall(uintptr_t env, void *caller, void *data, void *vals, size_t n,
	uint8_t *base, size_t len, int viewed);

// mandate_host_cb passes a host call to Go with the caller's store data,
// which says which run made it, and, when the store's memory is in
// mandate_mem_tab, its bytes as the call sees them (viewed is then 1).
static wasm_trap_t *mandate_host_cb(void *env, wasmtime_caller_t *caller,
		mandate_val_raw_t *vals, size_t n) {
	wasmtime_context_t *ctx = wasmtime_caller_context(caller);
	void *data = wasmtime_context_get_data(ctx);
	uint8_t *base = NULL;
	size_t len = 0;
	int viewed = 0;
	mandate_mem_table_t *t = __atomic_load_n(&mandate_mem_tab, __ATOMIC_ACQUIRE);
	size_t i = (size_t)data;
	if (t != NULL && i < t->n && __atomic_load_n(&t->slots[i].ctx, __ATOMIC_ACQUIRE) == (void *)ctx) {
		mandate_mem_t mem = t->slots[i].mem;
		base = wasmtime_memory_data(ctx, &mem);
		len = wasmtime_memory_data_size(ctx, &mem);
		viewed = 1;
	}
	return (wasm_trap_t *)mandateHostCall((uintptr_t)env, caller, data, vals, n, base, len, viewed);
}

// mandate_define defines module.name in linker as mandate_host_cb with env
// and type ty. It returns NULL, or the error's message (to be freed).
static char *mandate_define(void *linker, _GoString_ module, _GoString_ name, void *ty, uintptr_t env) {
	wasmtime_error_t *err = wasmtime_linker_define_func_unchecked((wasmtime_linker_t *)linker,
		_GoStringPtr(module), _GoStringLen(module), _GoStringPtr(name), _GoStringLen(name),
		(const wasm_functype_t *)ty, mandate_host_cb, (void *)env, NULL);
	if (err == NULL) {
		return NULL;
	}
	mandate_byte_vec_t msg = {0, NULL};
	wasmtime_error_message(err, &msg);
	char *out = malloc(msg.size + 1);
	if (out != NULL) {
		memcpy(out, msg.data, msg.size);
		out[msg.size] = 0;
	}
	wasm_byte_vec_delete(&msg);
	wasmtime_error_delete(err);
	return out;
}

static void *mandate_trap(_GoString_ msg) {
	return wasmtime_trap_new(_GoStringPtr(msg), _GoStringLen(msg));
}

static void *mandate_store_context(void *store) {
	return wasmtime_store_context((wasmtime_store_t *)store);
}

static void *mandate_store_data(void *store) {
	return wasmtime_context_get_data(wasmtime_store_context((wasmtime_store_t *)store));
}

static int mandate_hostcall_linked(void) {
	return wasmtime_linker_define_func_unchecked != NULL && wasmtime_caller_context != NULL &&
		wasmtime_store_context != NULL && wasmtime_context_get_data != NULL &&
		wasmtime_trap_new != NULL && wasmtime_error_message != NULL &&
		wasmtime_memory_data != NULL && wasmtime_memory_data_size != NULL &&
		wasmtime_error_delete != NULL && wasm_byte_vec_delete != NULL;
}
*/
import "C"

import (
	"errors"
	"reflect"
	"runtime"
	"unsafe"

	wt "github.com/bytecodealliance/wasmtime-go/v39"
)

// hostcallLayoutOK reports whether wasmtime.Linker and wasmtime.FuncType
// start with their C pointers, a raw value is 16 bytes and a
// wasmtime.Memory is a wasmtime_memory_t, as this file assumes.
var hostcallLayoutOK = startsWithPtr(reflect.TypeFor[wt.Linker]()) &&
	startsWithPtr(reflect.TypeFor[wt.FuncType]()) &&
	C.sizeof_mandate_val_raw_t == unsafe.Sizeof(rawVal{}) &&
	C.sizeof_mandate_mem_t == unsafe.Sizeof(wt.Memory{})

// hostcallLinked reports whether the C API functions this file declares
// were linked in.
var hostcallLinked = C.mandate_hostcall_linked() != 0

// defineUnchecked defines module.name in linker, of type ty, as a host
// function whose calls reach mandateHostCall with env.
func defineUnchecked(linker *wt.Linker, module, name string, ty *wt.FuncType, env uintptr) error {
	msg := C.mandate_define(*(*unsafe.Pointer)(unsafe.Pointer(linker)), module, name,
		*(*unsafe.Pointer)(unsafe.Pointer(ty)), C.uintptr_t(env))
	runtime.KeepAlive(linker)
	runtime.KeepAlive(ty)
	if msg == nil {
		return nil
	}
	defer C.free(unsafe.Pointer(msg))
	return errors.New(C.GoString(msg))
}

// newTrap is a trap with message msg, for a host function to return; it
// becomes the guest's trap (wasmtime owns it once returned).
func newTrap(msg string) unsafe.Pointer { return C.mandate_trap(msg) }

// setMemSlot makes slot i of mandate_mem_tab the store's whose context is
// ctx, with memory mem (nil ctx: frees it). It reports false if the table
// could not grow (the slot is then not set).
//
// Preconditions: memSlotsMu is held.
func setMemSlot(i uintptr, ctx unsafe.Pointer, mem *wt.Memory) bool {
	var m C.mandate_mem_t
	if mem != nil {
		m = *(*C.mandate_mem_t)(unsafe.Pointer(mem))
	}
	return C.mandate_mem_set(C.size_t(i), ctx, m) != 0
}

// storeContext is the wasmtime_context_t of store: what a host call from
// it sees as its caller's context.
func storeContext(store *wt.Store) unsafe.Pointer {
	return C.mandate_store_context(storePtr(store))
}

// storeData is the data wasmtime keeps for store: what a host call from
// the store sees as its data (mandate_host_cb), so the key of runs.
func storeData(store *wt.Store) uintptr {
	return uintptr(C.mandate_store_data(storePtr(store)))
}
