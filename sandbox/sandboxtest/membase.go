package sandboxtest

import (
	"context"
	"sync"
	"unsafe"

	"github.com/mandatevm/mandate/sandbox"
)

// MemoryBase records where a task's linear memory is, so that a test can
// tell whether two tasks ran in the same memory (a pooled slot or mapping,
// reused). Register Func (i32) -> i32 as a host function; a guest calls it
// and it records the address of the memory's first byte, returning 0.
type MemoryBase struct {
	mu   sync.Mutex
	base uintptr
}

// Func is the host function, named name.
func (b *MemoryBase) Func(name string) sandbox.HostFunc {
	return sandbox.HostFunc{Name: name, Params: sandbox.Values(1), Fn: func(_ context.Context, mem sandbox.Memory, stack []uint64) {
		p, ok := mem.Read(0, 1)
		b.mu.Lock()
		if ok {
			b.base = uintptr(unsafe.Pointer(&p[0]))
		}
		b.mu.Unlock()
		stack[0] = 0
	}}
}

// Last is the address the last call recorded (0 for none).
func (b *MemoryBase) Last() uintptr {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.base
}
