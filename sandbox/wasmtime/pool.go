//go:build wasmtime

package wasmtime

// Instances from wasmtime's pooling allocator (see "Instances" in the
// package documentation).
//
// The C API functions are declared weak, as in interrupt.go, and checked by
// New (poolLinked).

/*
#include <stdint.h>
#include <stdlib.h>

typedef struct wasm_config_t wasm_config_t;
typedef struct wasmtime_pooling_allocation_config_t wasmtime_pooling_allocation_config_t;
extern wasmtime_pooling_allocation_config_t *wasmtime_pooling_allocation_config_new(void) __attribute__((weak));
extern void wasmtime_pooling_allocation_config_delete(wasmtime_pooling_allocation_config_t *) __attribute__((weak));
extern void wasmtime_pooling_allocation_config_linear_memory_keep_resident_set(wasmtime_pooling_allocation_config_t *, size_t) __attribute__((weak));
extern void wasmtime_pooling_allocation_config_table_keep_resident_set(wasmtime_pooling_allocation_config_t *, size_t) __attribute__((weak));
extern void wasmtime_pooling_allocation_config_table_elements_set(wasmtime_pooling_allocation_config_t *, size_t) __attribute__((weak));
extern void wasmtime_pooling_allocation_config_max_tables_per_module_set(wasmtime_pooling_allocation_config_t *, uint32_t) __attribute__((weak));
extern void wasmtime_pooling_allocation_config_max_memory_size_set(wasmtime_pooling_allocation_config_t *, size_t) __attribute__((weak));
extern void wasmtime_pooling_allocation_config_max_core_instance_size_set(wasmtime_pooling_allocation_config_t *, size_t) __attribute__((weak));
extern void wasmtime_pooling_allocation_config_total_memories_set(wasmtime_pooling_allocation_config_t *, uint32_t) __attribute__((weak));
extern void wasmtime_pooling_allocation_config_total_tables_set(wasmtime_pooling_allocation_config_t *, uint32_t) __attribute__((weak));
extern void wasmtime_pooling_allocation_config_total_core_instances_set(wasmtime_pooling_allocation_config_t *, uint32_t) __attribute__((weak));
extern void wasmtime_pooling_allocation_config_total_stacks_set(wasmtime_pooling_allocation_config_t *, uint32_t) __attribute__((weak));
extern void wasmtime_pooling_allocation_strategy_set(wasm_config_t *, const wasmtime_pooling_allocation_config_t *) __attribute__((weak));

typedef struct {
	size_t memory_keep, table_keep, table_elements, max_memory, max_instance_size;
	uint32_t instances, tables, tables_per_module;
} mandate_pool_t;

// mandate_pooling sets the pooling allocation strategy on cfg.
static void mandate_pooling(void *cfg, mandate_pool_t l) {
	wasmtime_pooling_allocation_config_t *p = wasmtime_pooling_allocation_config_new();
	wasmtime_pooling_allocation_config_linear_memory_keep_resident_set(p, l.memory_keep);
	wasmtime_pooling_allocation_config_table_keep_resident_set(p, l.table_keep);
	wasmtime_pooling_allocation_config_table_elements_set(p, l.table_elements);
	wasmtime_pooling_allocation_config_max_tables_per_module_set(p, l.tables_per_module);
	wasmtime_pooling_allocation_config_max_memory_size_set(p, l.max_memory);
	wasmtime_pooling_allocation_config_max_core_instance_size_set(p, l.max_instance_size);
	wasmtime_pooling_allocation_config_total_memories_set(p, l.instances);
	wasmtime_pooling_allocation_config_total_tables_set(p, l.tables);
	wasmtime_pooling_allocation_config_total_core_instances_set(p, l.instances);
	// Stacks are for async calls, which this package never makes; by
	// default the pool would map 1,000 of them, two mappings each.
	wasmtime_pooling_allocation_config_total_stacks_set(p, 0);
	wasmtime_pooling_allocation_strategy_set((wasm_config_t *)cfg, p);
	wasmtime_pooling_allocation_config_delete(p);
}

static int mandate_pool_linked(void) {
	return wasmtime_pooling_allocation_config_new != NULL && wasmtime_pooling_allocation_config_delete != NULL &&
		wasmtime_pooling_allocation_config_linear_memory_keep_resident_set != NULL &&
		wasmtime_pooling_allocation_config_table_keep_resident_set != NULL &&
		wasmtime_pooling_allocation_config_table_elements_set != NULL &&
		wasmtime_pooling_allocation_config_max_tables_per_module_set != NULL &&
		wasmtime_pooling_allocation_config_max_memory_size_set != NULL &&
		wasmtime_pooling_allocation_config_max_core_instance_size_set != NULL &&
		wasmtime_pooling_allocation_config_total_memories_set != NULL &&
		wasmtime_pooling_allocation_config_total_tables_set != NULL &&
		wasmtime_pooling_allocation_config_total_core_instances_set != NULL &&
		wasmtime_pooling_allocation_config_total_stacks_set != NULL &&
		wasmtime_pooling_allocation_strategy_set != NULL;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	wt "github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/mandatevm/mandate/sandbox/internal/wasmbin"
)

// PoolInstances is how many instances, so how many tasks, run at once on
// an engine with the pooling allocator (the default): the kernel's default
// bound on tasks running at once (kernel.DefaultMaxTasks). A Run past it
// fails with ErrPoolFull; a kernel configured for more tasks at once wants
// the on-demand allocator (AllocatorEnv).
const PoolInstances = 256

// AllocatorEnv names the environment variable New reads to choose how
// instances are allocated: "pooling" (or unset) for wasmtime's pooling
// allocator, "ondemand" for a fresh mapping per instance.
const AllocatorEnv = "MANDATE_WASMTIME_ALLOCATOR"

// ErrPoolFull is what Run returns, wrapped, when PoolInstances instances
// already run on a pooling engine.
var ErrPoolFull = errors.New("sandbox/wasmtime: every instance slot of the pooling allocator is in use")

// Slot sizes of the pool. A memory slot is wasmtime's default reservation
// for a 32-bit memory (4 GiB and its 32 MiB guard, reserved, not
// committed), whatever the run's memory limit: a smaller reservation would
// make wasmtime compile explicit bounds checks into every memory access,
// and the code must be what the compile jobs and the disk cache hold. Every
// limit up to defaultMemoryLimit fits; the store's limiter still enforces
// the run's own. The pool reserves PoolInstances such slots (about 1 TiB
// of address space) when the engine is made.
//
// Where the kernel has the PAGEMAP_SCAN ioctl (Linux 6.7 and later,
// pagemapScan), the first poolMemoryKeep bytes of a memory slot stay
// resident between instances: wasmtime asks the kernel which of those pages
// the last instance wrote and resets only those, copying the module's
// image back over them (zeros past it), and drops the rest of the slot
// with madvise. The next instance then finds the pages a task of the same
// module writes already faulted in, which on this project's VMs halves a
// Go reactor's task (BenchmarkLifecycle's go-reactor: 287-313 µs of CPU
// with nothing kept, 143-146 µs with 16 MiB, alternated). Without the
// ioctl nothing is kept (poolMemoryKeep is not used): wasmtime would reset
// the kept bytes with memset, every page of them whether touched or not,
// which cost a Go reactor 2-3x its task on a VM without it (150-270 µs of
// CPU with nothing kept, 430-660 µs with 16 MiB, 550-590 µs with 4 MiB).
// Either way the next instance starts from exactly the image
// (TestPoolSlotReset). A table slot is smaller and a Go guest's table is
// written whole at every instantiation, so its first poolTableKeep bytes
// (a Go guest's ~10,200 elements) stay resident.
//
// A table slot holds the largest table a module may declare
// (MaxTableInitial elements, above MaxTableElements), a module may define
// as many tables as CapTables lets it, and the pool has that many per
// instance, so only the instance count ever runs out.
const (
	poolMemoryKeep   = 16 << 20 // where PAGEMAP_SCAN is (above)
	poolTableKeep    = 128 << 10
	poolInstanceSize = 64 << 20                    // bound on an instance's own state (wasmtime's default 1 MiB is below a large Go guest's)
	poolSlotSpan     = defaultMemoryLimit + 32<<20 // address space of a memory slot
	poolTableSlot    = wasmbin.MaxTableInitial * 8 // address space of a table slot
)

// memoryKeep is the bytes of a memory slot kept resident (see above).
func memoryKeep() uint64 {
	if pagemapScan() {
		return poolMemoryKeep
	}
	return 0
}

// poolLinked reports whether the C API functions of this file were linked.
var poolLinked = C.mandate_pool_linked() != 0

// allocatorFromEnv is the allocator AllocatorEnv chooses: onDemand, or an
// error for a value it does not know.
func allocatorFromEnv() (onDemand bool, err error) {
	switch v := os.Getenv(AllocatorEnv); v {
	case "", "pooling":
		return false, nil
	case "ondemand":
		return true, nil
	default:
		return false, fmt.Errorf("sandbox/wasmtime: %s=%q: want pooling or ondemand", AllocatorEnv, v)
	}
}

// setPooling turns on wasmtime's pooling allocator for cfg, with slots for
// instances instances. The config's C pointer is the first field of
// wasmtime.Config (layoutOK).
func setPooling(cfg *wt.Config, instances uint32) {
	C.mandate_pooling(*(*unsafe.Pointer)(unsafe.Pointer(cfg)), C.mandate_pool_t{
		memory_keep:       C.size_t(memoryKeep()),
		table_keep:        poolTableKeep,
		table_elements:    wasmbin.MaxTableInitial,
		max_memory:        defaultMemoryLimit,
		max_instance_size: poolInstanceSize,
		instances:         C.uint32_t(instances),
		tables:            C.uint32_t(instances * wasmbin.MaxTables),
		tables_per_module: wasmbin.MaxTables,
	})
}

// Pooling reports whether the engine takes its instances from wasmtime's
// pooling allocator (false: the on-demand allocator).
func (e *Engine) Pooling() bool { return e.pool != nil }

// slots counts the instances of a pooling engine.
type slots struct {
	max   int32
	inUse atomic.Int32
}

// acquire takes an instance slot, or returns an error wrapping ErrPoolFull.
func (s *slots) acquire() error {
	if s.inUse.Add(1) > s.max {
		s.inUse.Add(-1)
		return fmt.Errorf("%w: %d instances run on this engine (%s=ondemand lifts the bound)", ErrPoolFull, s.max, AllocatorEnv)
	}
	return nil
}

func (s *slots) release() { s.inUse.Add(-1) }
