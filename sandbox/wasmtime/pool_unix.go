//go:build wasmtime && unix

package wasmtime

import (
	"syscall"

	"github.com/mandatevm/mandate/sandbox/internal/wasmbin"
)

// poolFits reports whether the pool's address space can be reserved now:
// wasmtime aborts the process when it can not reserve it (a limit on the
// address space, RLIMIT_AS, or the space taken by other engines), so New
// tries the reservation first and falls back to the on-demand allocator.
func poolFits(instances uint32) bool {
	const userSpace = 1 << 47 // x86-64's and arm64's usual user address space
	if uint64(instances) >= userSpace/(poolSlotSpan+wasmbin.MaxTables*poolTableSlot) {
		return false
	}
	// The memory slots, the table slots and a margin.
	size := int(instances)*(poolSlotSpan+wasmbin.MaxTables*poolTableSlot) + 1<<30
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_NONE,
		syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return false
	}
	return syscall.Munmap(b) == nil
}
