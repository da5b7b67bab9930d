//go:build wasmtime

package wasmtime

import (
	"encoding/binary"
	"math"
	"unsafe"

	wt "github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/mandatevm/mandate/sandbox"
)

var _ sandbox.Memory = (*memory)(nil)

// lookUpMemory finds the instance's exported memory once, for every host
// call of the run.
func (r *run) lookUpMemory(store *wt.Store, inst *wt.Instance) {
	if ext := inst.GetExport(store, "memory"); ext != nil {
		r.guestMem = ext.Memory()
	}
	r.memLooked = true
	r.publishMemory()
}

// memoryView is the bytes of the calling instance's memory "memory" (nil
// when it has none) for the host call from caller (a wasmtime_caller_t),
// valid until the guest runs again: a memory.grow may move them, so a view
// is never kept past the host call it was taken for.
func (r *run) memoryView(caller unsafe.Pointer) []byte {
	if r.viewed {
		// Read by the C side for this call (mandateHostCall).
		v := r.view
		r.viewed, r.view = false, nil
		return v
	}
	if !r.memLooked {
		return callerMemory(caller)
	}
	if r.guestMem == nil {
		return nil
	}
	return callerView(caller, r.guestMem)
}

// callerMemory is the calling instance's exported memory "memory", or nil,
// looked up by name: only for a host call made during instantiation, before
// lookUpMemory (each lookup allocates wasmtime-go objects with finalizers).
func callerMemory(caller unsafe.Pointer) []byte {
	c := asCaller(&caller)
	ext := c.GetExport("memory")
	if ext == nil {
		return nil
	}
	mem := ext.Memory()
	if mem == nil {
		return nil
	}
	return mem.UnsafeData(c)
}

// memory is a guest's linear memory as a host function sees it: a view of
// the bytes wasmtime reports for the calling instance's memory, valid until
// the guest runs again (a growth may move the memory). Every accessor
// bounds-checks and never panics; a nil view is an empty memory.
type memory struct {
	b []byte
}

func (m *memory) inRange(offset, n uint32) bool {
	return uint64(offset)+uint64(n) <= uint64(len(m.b))
}

// Read implements sandbox.Memory.
func (m *memory) Read(offset, byteCount uint32) ([]byte, bool) {
	if !m.inRange(offset, byteCount) {
		return nil, false
	}
	end := uint64(offset) + uint64(byteCount)
	return m.b[offset:end:end], true
}

// Write implements sandbox.Memory.
func (m *memory) Write(offset uint32, v []byte) bool {
	if uint64(len(v)) > math.MaxUint32 || !m.inRange(offset, uint32(len(v))) {
		return false
	}
	copy(m.b[offset:], v)
	return true
}

// ReadUint32Le implements sandbox.Memory.
func (m *memory) ReadUint32Le(offset uint32) (uint32, bool) {
	if !m.inRange(offset, 4) {
		return 0, false
	}
	return binary.LittleEndian.Uint32(m.b[offset:]), true
}

// WriteUint32Le implements sandbox.Memory.
func (m *memory) WriteUint32Le(offset, v uint32) bool {
	if !m.inRange(offset, 4) {
		return false
	}
	binary.LittleEndian.PutUint32(m.b[offset:], v)
	return true
}

// Size implements sandbox.Memory. A full 4 GiB memory reports
// math.MaxUint32, the largest size a uint32 holds.
func (m *memory) Size() uint32 {
	return uint32(min(uint64(len(m.b)), math.MaxUint32))
}

func (m *memory) readUint64Le(offset uint32) (uint64, bool) {
	if !m.inRange(offset, 8) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(m.b[offset:]), true
}

func (m *memory) writeUint64Le(offset uint32, v uint64) bool {
	if !m.inRange(offset, 8) {
		return false
	}
	binary.LittleEndian.PutUint64(m.b[offset:], v)
	return true
}
