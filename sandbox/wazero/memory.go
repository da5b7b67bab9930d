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
	// startup is what the module's start-up needs, in bytes, when it is
	// known (a snapshot's memory: measured once, when it was taken); the
	// first allocation is then exactly that, with no headroom.
	startup uint64
	// image, when set, is what the memory starts with (image.go): the
	// form was compiled without the data segments that wrote it.
	image *memImage
	// mapped backs a memory without an image with an anonymous mapping
	// (options.heapMemory unset; image.go), not the Go heap.
	mapped bool
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
	if l.image != nil {
		if m := l.image.memory(l, limit); m != nil {
			return m
		}
	} else if l.mapped {
		if m, err := mapImage(-1, 0, limit, l); err == nil {
			return m
		}
	}
	m := &limitedMemory{l: l, limit: limit, initialCap: capacity, headroom: initialHeadroom, image: l.image}
	if l.startup > 0 {
		m.headroom = 0
	}
	return m
}

// initialHeadroom is the capacity reserved past a memory's initial size
// when what the module's start-up needs is not known: the Go runtime grows
// its memory by a few hundred KiB while it starts.
const initialHeadroom = 512 << 10

// growthStep is the least a memory grows by once it must move: growing a
// memory copies it whole, so small steps would copy it again and again.
const growthStep = 1 << 20

type limitedMemory struct {
	l          *memoryLimiter
	limit      uint64
	initialCap uint64
	headroom   uint64
	buf        []byte
	image      *memImage // copied in at the first allocation, when set
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
	// Grow geometrically like append, by at least growthStep, but never
	// reserve past the limit. The first allocation leaves headroom unless
	// the start-up's need is known: every reallocation costs a clear and a
	// copy of the whole buffer.
	newCap := max(size, uint64(cap(m.buf))*2, m.initialCap)
	if m.buf == nil {
		newCap = max(newCap, size+m.headroom)
	} else {
		newCap = max(newCap, uint64(cap(m.buf))+growthStep)
	}
	if newCap > m.limit {
		newCap = m.limit
	}
	nb := make([]byte, size, newCap)
	if m.buf == nil && m.image != nil {
		if err := m.image.copyInto(nb); err != nil {
			m.l.refused.Store(true)
			return nil
		}
	}
	copy(nb, m.buf)
	m.buf = nb
	return nb
}

// Free implements experimental.LinearMemory.
func (m *limitedMemory) Free() { m.buf = nil }
