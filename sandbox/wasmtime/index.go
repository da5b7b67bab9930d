//go:build wasmtime

package wasmtime

import (
	"sync"
	"sync/atomic"
)

// index holds values by small integers, for host calls to find theirs
// without a lock: a load is an atomic read of the slots and of the slot.
// A sync.Map (or a cgo.Handle, which is one) hashes an interface key
// behind two indirections at every call; that was a tenth of a capability
// call on wasmtime.
//
// Writes take mu; growing copies the slots into a new array, published
// whole, and the old one is left to the collector. A reader holding an old
// array sees what its slots held at the time it loaded the array, which is
// enough for its use here: a store's run is set before the store runs
// anything and cleared after it stopped, a host function is set before its
// engine compiles anything and cleared once nothing runs.
type index[T any] struct {
	mu    sync.Mutex
	slots atomic.Pointer[[]atomic.Pointer[T]]
	free  []uintptr // slots given back (put), for add to reuse
	next  uintptr   // slots add has handed out, free ones included
}

// maxIndex bounds the slots: an index beyond is not held (the callers
// fall back to a map, or refuse).
const maxIndex = 1 << 20

// load is the value at i, or nil.
func (x *index[T]) load(i uintptr) *T {
	s := x.slots.Load()
	if s == nil || i >= uintptr(len(*s)) {
		return nil
	}
	return (*s)[i].Load()
}

// set makes v the value at i (nil clears it). It reports false, holding
// nothing, when i is not below maxIndex.
func (x *index[T]) set(i uintptr, v *T) bool {
	if i >= maxIndex {
		return false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.setLocked(i, v)
	return true
}

// setLocked is set with mu held and i below maxIndex.
func (x *index[T]) setLocked(i uintptr, v *T) {
	s := x.slots.Load()
	if s == nil || i >= uintptr(len(*s)) {
		if v == nil {
			return
		}
		n := uintptr(64)
		for n <= i {
			n *= 2
		}
		grown := make([]atomic.Pointer[T], n)
		if s != nil {
			for j := range *s {
				grown[j].Store((*s)[j].Load())
			}
		}
		x.slots.Store(&grown)
		s = &grown
	}
	(*s)[i].Store(v)
}

// add holds v at a free index and returns it; ok is false when every
// index below maxIndex is taken.
func (x *index[T]) add(v *T) (i uintptr, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if n := len(x.free); n > 0 {
		i, x.free = x.free[n-1], x.free[:n-1]
	} else {
		if x.next >= maxIndex {
			return 0, false
		}
		i = x.next
		x.next++
	}
	x.setLocked(i, v)
	return i, true
}

// put clears index i, taken by add, and gives it back.
func (x *index[T]) put(i uintptr) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.setLocked(i, nil)
	x.free = append(x.free, i)
}
