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

// mandateHostCall is hostcall.go's.
extern void *mandateHostCall(uintptr_t env, void *caller, void *data, void *vals, size_t n);

// mandate_host_cb passes a host call to Go with the caller's store data,
// which says which run made it.
static wasm_trap_t *mandate_host_cb(void *env, wasmtime_caller_t *caller,
		mandate_val_raw_t *vals, size_t n) {
	void *data = wasmtime_context_get_data(wasmtime_caller_context(caller));
	return (wasm_trap_t *)mandateHostCall((uintptr_t)env, caller, data, vals, n);
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

static void *mandate_store_data(void *store) {
	return wasmtime_context_get_data(wasmtime_store_context((wasmtime_store_t *)store));
}

static int mandate_hostcall_linked(void) {
	return wasmtime_linker_define_func_unchecked != NULL && wasmtime_caller_context != NULL &&
		wasmtime_store_context != NULL && wasmtime_context_get_data != NULL &&
		wasmtime_trap_new != NULL && wasmtime_error_message != NULL &&
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
// start with their C pointers, and a raw value is 16 bytes, as this file
// assumes.
var hostcallLayoutOK = startsWithPtr(reflect.TypeFor[wt.Linker]()) &&
	startsWithPtr(reflect.TypeFor[wt.FuncType]()) &&
	C.sizeof_mandate_val_raw_t == unsafe.Sizeof(rawVal{})

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

// storeData is the data wasmtime keeps for store: what a host call from
// the store sees as its data (mandate_host_cb), so the key of runs.
func storeData(store *wt.Store) uintptr {
	return uintptr(C.mandate_store_data(storePtr(store)))
}
