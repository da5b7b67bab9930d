//go:build wasmtime

package wasmtime

import (
	"encoding/binary"
	"math"

	"github.com/mandatevm/mandate/sandbox"
)

var _ sandbox.Memory = (*memory)(nil)

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
