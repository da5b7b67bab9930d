package wazero

import (
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// memoryLimiter backs one task's linear memory and refuses to grow it past
// limit bytes: Reallocate returns nil, which wazero turns into memory.grow
// returning -1 (internal/wasm/memory.go, MemoryInstance.Grow; the compiler
// engine reaches it through ExitCodeGrowMemory, so the path is the same for
// the compiler and the interpreter).
//
// One limiter serves one instantiation: wazero calls Allocate once per
// defined memory, and a Go guest defines exactly one.
type memoryLimiter struct {
	limit uint64
	// refused is set when a growth (or the initial allocation) was refused.
	refused atomic.Bool
}

// Allocate implements experimental.MemoryAllocator.
func (l *memoryLimiter) Allocate(capacity, max uint64) experimental.LinearMemory {
	limit := l.limit
	if max < limit {
		limit = max
	}
	if capacity > limit {
		capacity = limit
	}
	return &limitedMemory{l: l, limit: limit, initialCap: capacity}
}

// initialHeadroom is the capacity reserved past a memory's initial size.
const initialHeadroom = 512 << 10

type limitedMemory struct {
	l          *memoryLimiter
	limit      uint64
	initialCap uint64
	buf        []byte
}

// Reallocate implements experimental.LinearMemory. Memory only grows, and
// bytes past len(buf) were never exposed to the guest, so reslicing within
// the capacity hands out zeroed memory as the spec requires.
func (m *limitedMemory) Reallocate(size uint64) []byte {
	if size > m.limit {
		m.l.refused.Store(true)
		return nil
	}
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size]
		return m.buf
	}
	// Grow geometrically like append, but never reserve past the limit.
	// The first allocation leaves headroom: the Go runtime grows its
	// memory by a few hundred KiB while it starts, and every reallocation
	// costs a clear and a copy of the whole buffer.
	newCap := max(size, uint64(cap(m.buf))*2, m.initialCap)
	if m.buf == nil {
		newCap = max(newCap, size+initialHeadroom)
	}
	if newCap > m.limit {
		newCap = m.limit
	}
	nb := make([]byte, size, newCap)
	copy(nb, m.buf)
	m.buf = nb
	return nb
}

// Free implements experimental.LinearMemory.
func (m *limitedMemory) Free() { m.buf = nil }
