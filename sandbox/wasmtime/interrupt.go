//go:build wasmtime

package wasmtime

// Stopping a run: epoch interruption with a per-store callback.
//
// wasmtime's epoch interruption makes compiled code compare the engine's
// epoch with the store's deadline at every function entry and loop header
// (a load and a compare). wasmtime-go exposes the epoch and a store's
// deadline, but not the deadline callback, and without a callback reaching
// the deadline traps. A run must stop when its own context is done, however
// many other runs share the engine, and must not be stopped otherwise; so
// every store gets a callback, written in C below, that:
//
//   - ends the run (returns an error) when the store's stop flag is set;
//   - otherwise moves the store's deadline one epoch on and continues.
//
// Each store's deadline is always "the next epoch". When a run's context is
// done, watchEpoch sets that store's flag and increments the engine's epoch:
// every running store reaches its deadline and calls its callback once, the
// stopped one ends at its next check, the others carry on. No ticker is
// needed: the epoch moves only when some run is stopped.
//
// The C API functions are declared here by hand (wasmtime-go exports
// neither its C headers' types nor the store's C pointer): they are part of
// wasmtime v39's C API (wasmtime/store.h, wasmtime/config.h), and
// libwasmtime.a is linked by wasmtime-go itself. They are declared weak so
// that cgo's first, trial link of this package, which has no libwasmtime,
// succeeds; the binary's link resolves them, and New refuses to start if it
// did not (linked). The store's and the config's C pointers are the first
// fields of wasmtime.Store and wasmtime.Config (layoutOK checks that once
// with reflect, and New refuses to start if it is not so).

/*
#include <stdint.h>
#include <stdlib.h>

typedef struct wasmtime_store wasmtime_store_t;
typedef struct wasmtime_context wasmtime_context_t;
typedef struct wasmtime_error wasmtime_error_t;
typedef uint8_t wasmtime_update_deadline_kind_t;

extern wasmtime_error_t *wasmtime_error_new(const char *) __attribute__((weak));
extern void wasmtime_store_epoch_deadline_callback(
    wasmtime_store_t *store,
    wasmtime_error_t *(*func)(wasmtime_context_t *context, void *data,
                              uint64_t *epoch_deadline_delta,
                              wasmtime_update_deadline_kind_t *update_kind),
    void *data, void (*finalizer)(void *)) __attribute__((weak));

static wasmtime_error_t *mandate_epoch_cb(wasmtime_context_t *ctx, void *data,
    uint64_t *delta, wasmtime_update_deadline_kind_t *kind) {
	if (__atomic_load_n((int32_t *)data, __ATOMIC_ACQUIRE) != 0) {
		return wasmtime_error_new("mandate: run stopped");
	}
	*delta = 1;
	*kind = 0; // WASMTIME_UPDATE_DEADLINE_CONTINUE
	return NULL;
}

// mandate_linked reports whether the functions above resolved (they are
// weak: see the comment at the top of this file).
static int mandate_linked(void) {
	return wasmtime_error_new != NULL && wasmtime_store_epoch_deadline_callback != NULL;
}

// mandate_watch_epoch installs the callback on store with a new stop flag,
// freed by wasmtime when the store is deleted.
static int32_t *mandate_watch_epoch(void *store) {
	int32_t *flag = calloc(1, sizeof(int32_t));
	if (flag == NULL) {
		return NULL;
	}
	wasmtime_store_epoch_deadline_callback((wasmtime_store_t *)store, mandate_epoch_cb, flag, free);
	return flag;
}
*/
import "C"

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"
	"unsafe"

	wt "github.com/bytecodealliance/wasmtime-go/v39"
)

// layoutOK reports whether wasmtime.Store and wasmtime.Config start with
// their C pointers, as storePtr and setPooling (pool.go) assume. New
// refuses to start an engine otherwise (a wasmtime-go whose layout
// changed).
var layoutOK = startsWithPtr(reflect.TypeFor[wt.Store]()) && startsWithPtr(reflect.TypeFor[wt.Config]())

// linked reports whether the C API functions this file declares were
// linked in.
var linked = C.mandate_linked() != 0

func startsWithPtr(t reflect.Type) bool {
	f, ok := t.FieldByName("_ptr")
	return ok && f.Offset == 0 && f.Type.Kind() == reflect.Pointer
}

// storePtr is the wasmtime_store_t* of s.
func storePtr(s *wt.Store) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(s))
}

// watchEpoch arranges for the guest running in store to stop soon after
// ctx is done. The returned function must be called before the store is
// closed (the flag is freed with the store).
func watchEpoch(store *wt.Store, eng *wt.Engine, ctx context.Context) (stop func()) {
	flag := (*int32)(unsafe.Pointer(C.mandate_watch_epoch(storePtr(store))))
	if flag == nil {
		panic("sandbox/wasmtime: out of memory for a stop flag")
	}
	store.SetEpochDeadline(1)
	var (
		mu    sync.Mutex
		alive = true // protected by mu: the flag may be written
	)
	stopWatch := context.AfterFunc(ctx, func() {
		// Under mu, so that once stop has returned neither the flag nor
		// the engine (which Engine.Close may free after the run) is
		// touched.
		mu.Lock()
		defer mu.Unlock()
		if alive {
			atomic.StoreInt32(flag, 1)
			eng.IncrementEpoch()
		}
	})
	return func() {
		stopWatch()
		mu.Lock()
		alive = false
		mu.Unlock()
	}
}
