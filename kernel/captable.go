package kernel

import (
	"sync"
	"sync/atomic"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Table limits.
const (
	// MaxHandles is the most entries any capability table may hold: the
	// slot index has abi.HandleIndexBits bits.
	MaxHandles = 1 << abi.HandleIndexBits
	// DefaultMaxHandles is a task's handle limit when its spec sets none.
	DefaultMaxHandles = 1024
)

// entry is what a handle names: a capability, a blob or a child task,
// exactly one.
type entry struct {
	cap  *Cap
	blob *kindapi.Blob
	task *Task
}

// The table's slots are in chunks of chunkLen, allocated as the table
// grows and never moved or freed, so a reader finds a slot with two loads
// and no lock.
const (
	chunkBits = 6
	chunkLen  = 1 << chunkBits
	numChunks = MaxHandles / chunkLen
)

// cell is one slot of the table. Writers (insert, fill, remove, all under
// CapTable.mu) and readers (get, lock-free) follow a sequence lock whose
// sequence is the slot's generation:
//
//   - state is gen<<1, plus 1 while the slot holds an entry: the
//     generation of the current (or next) occupant. Generations only grow,
//     so a state once left is never seen again;
//   - fill stores the entry's pointers, then the state with the bit set;
//     remove stores the state with the bit clear (and the next generation),
//     then clears the pointers;
//   - a reader loads the state (it must be the handle's generation, with
//     the bit), the pointer it wants, then the state again: if it is still
//     the same, no remove began before the pointer was read, so the pointer
//     is the entry the handle names (Go's atomics are sequentially
//     consistent), and the read is ordered before any remove. A reader that
//     sees the state change reports the handle gone, as a read after the
//     remove would.
//
// So a handle removed (or a slot reused) before a read began is never
// found, and a stale handle never names the slot's next occupant.
type cell struct {
	state atomic.Uint32
	cap   atomic.Pointer[Cap]
	blob  atomic.Pointer[kindapi.Blob]
	task  atomic.Pointer[Task]
}

// occupied is a cell's state while it holds an entry of generation gen.
func occupied(gen uint32) uint32 { return gen<<1 | 1 }

// CapTable is a task's table of handles, like a process's file descriptor
// table. A handle is the slot index plus the slot's generation, so a handle
// kept after its entry was removed (a stale handle) never names the slot's
// next occupant: it is simply not found.
//
// CapTable is safe for concurrent use. Reading an entry (every capability
// call's first step) takes no lock (see cell); changing the table does.
type CapTable struct {
	chunks [numChunks]atomic.Pointer[[chunkLen]cell]

	mu    sync.Mutex
	next  uint32   // slots made so far, the index of the next new one; protected by mu
	free  []uint32 // protected by mu
	n     int      // live entries; protected by mu
	limit int

	blobBytes int64 // bytes of the blobs held; protected by mu
	blobLimit int64 // most bytes of blobs held at once; 0 = no bound
}

// NewCapTable returns an empty table that holds at most limit entries
// (DefaultMaxHandles when limit <= 0, never more than MaxHandles).
func NewCapTable(limit int) *CapTable {
	if limit <= 0 {
		limit = DefaultMaxHandles
	}
	if limit > MaxHandles {
		limit = MaxHandles
	}
	return &CapTable{limit: limit}
}

// Len is the number of live entries.
func (t *CapTable) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// Limit is the most entries the table holds.
func (t *CapTable) Limit() int { return t.limit }

// SetBlobLimit bounds the bytes of the blobs the table holds at once (each
// handle to a blob counts the blob's length); n <= 0 removes the bound.
// Inserting a blob past it fails with ELIMIT; removing one frees its bytes.
func (t *CapTable) SetBlobLimit(n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.blobLimit = max(n, 0)
}

// BlobBytes is the bytes of the blobs the table holds.
func (t *CapTable) BlobBytes() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.blobBytes
}

// InsertCap adds c and returns its handle, or kindapi.ErrLimit when full.
func (t *CapTable) InsertCap(c *Cap) (abi.Handle, error) { return t.insert(entry{cap: c}) }

// InsertTask adds a handle to child task c, or kindapi.ErrLimit when full.
func (t *CapTable) InsertTask(c *Task) (abi.Handle, error) { return t.insert(entry{task: c}) }

// GetTask returns the child task h names.
func (t *CapTable) GetTask(h abi.Handle) (*Task, error) {
	c, ok := t.loadTask(h)
	switch {
	case !ok:
		return nil, kindapi.Errorf(abi.EBADHANDLE, "handle %#x is not in this task's table", uint32(h))
	case c == nil:
		return nil, kindapi.Errorf(abi.EWRONGTYPE, "handle %#x does not name a task", uint32(h))
	}
	return c, nil
}

// InsertBlob adds b and returns its handle, or kindapi.ErrLimit when full.
func (t *CapTable) InsertBlob(b *kindapi.Blob) (abi.Handle, error) { return t.insert(entry{blob: b}) }

func (t *CapTable) insert(e entry) (abi.Handle, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	idx, err := t.reserveLocked()
	if err != nil {
		return 0, err
	}
	return t.fillLocked(idx, e)
}

// cell returns the slot h's index names, or nil when there is none.
func (t *CapTable) cell(h abi.Handle) *cell {
	idx := h.Index()
	ch := t.chunks[idx>>chunkBits].Load()
	if ch == nil {
		return nil
	}
	return &ch[idx&(chunkLen-1)]
}

// cellAt is the slot at idx, which reserve handed out.
func (t *CapTable) cellAt(idx int) *cell {
	return &t.chunks[idx>>chunkBits].Load()[idx&(chunkLen-1)]
}

// lookup returns the slot h names when it holds h's entry.
//
// Preconditions: t.mu is held.
func (t *CapTable) lookup(h abi.Handle) (*cell, bool) {
	s := t.cell(h)
	if h == 0 || s == nil || s.state.Load() != occupied(h.Gen()) {
		return nil, false
	}
	return s, true
}

// load is the entry h names in the field of its cell that of selects,
// without a lock: found is false when h names nothing, e nil when it names
// an entry of another type. The cell's state is read before and after the
// field (a sequence lock whose sequence is the generation, which only
// grows): a cell emptied or reused meanwhile is never read through an old
// handle, nor a half-filled one through a forged next-generation handle.
func load[T any](t *CapTable, h abi.Handle, of func(*cell) *atomic.Pointer[T]) (e *T, found bool) {
	s := t.cell(h)
	if h == 0 || s == nil {
		return nil, false
	}
	want := occupied(h.Gen())
	if s.state.Load() != want {
		return nil, false
	}
	e = of(s).Load()
	if s.state.Load() != want {
		return nil, false
	}
	return e, true
}

func (t *CapTable) loadCap(h abi.Handle) (*Cap, bool) {
	return load(t, h, func(s *cell) *atomic.Pointer[Cap] { return &s.cap })
}

func (t *CapTable) loadBlob(h abi.Handle) (*kindapi.Blob, bool) {
	return load(t, h, func(s *cell) *atomic.Pointer[kindapi.Blob] { return &s.blob })
}

func (t *CapTable) loadTask(h abi.Handle) (*Task, bool) {
	return load(t, h, func(s *cell) *atomic.Pointer[Task] { return &s.task })
}

// GetCap returns the capability h names: kindapi.ErrBadHandle when h is not
// in this table, kindapi.ErrWrongType when it names a blob.
func (t *CapTable) GetCap(h abi.Handle) (*Cap, error) {
	c, ok := t.loadCap(h)
	switch {
	case !ok:
		return nil, kindapi.Errorf(abi.EBADHANDLE, "handle %#x is not in this task's table", uint32(h))
	case c == nil:
		return nil, kindapi.Errorf(abi.EWRONGTYPE, "handle %#x does not name a capability", uint32(h))
	}
	return c, nil
}

// GetBlob returns the blob h names: kindapi.ErrBadHandle when h is not in
// this table, kindapi.ErrWrongType when it names a capability.
func (t *CapTable) GetBlob(h abi.Handle) (*kindapi.Blob, error) {
	b, ok := t.loadBlob(h)
	switch {
	case !ok:
		return nil, kindapi.Errorf(abi.EBADHANDLE, "handle %#x is not in this task's table", uint32(h))
	case b == nil:
		return nil, kindapi.Errorf(abi.EWRONGTYPE, "handle %#x does not name a blob", uint32(h))
	}
	return b, nil
}

// Remove deletes h from the table. The slot's generation advances, so h and
// every copy of it become stale; a slot whose generation is exhausted is
// retired rather than reused.
func (t *CapTable) Remove(h abi.Handle) error {
	_, err := t.remove(h)
	return err
}

func (t *CapTable) remove(h abi.Handle) (entry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.lookup(h)
	if !ok {
		return entry{}, kindapi.Errorf(abi.EBADHANDLE, "handle %#x is not in this task's table", uint32(h))
	}
	e := entry{cap: s.cap.Load(), blob: s.blob.Load(), task: s.task.Load()}
	// The state first: from here on no reader finds h (see cell). A
	// slot whose generation is exhausted is retired: never freed.
	if gen := h.Gen(); gen >= abi.MaxGen {
		s.state.Store(gen << 1)
	} else {
		s.state.Store((gen + 1) << 1)
		t.free = append(t.free, h.Index())
	}
	s.cap.Store(nil)
	s.blob.Store(nil)
	s.task.Store(nil)
	t.n--
	if e.blob != nil {
		t.blobBytes -= int64(e.blob.Len())
	}
	return e, nil
}

// reserve holds a slot for an entry that a call will produce, so a call
// whose result would not fit is refused before its effect. The slot counts
// against the limit until fill or unreserve.
func (t *CapTable) reserve() (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reserveLocked()
}

// Preconditions: t.mu is held.
func (t *CapTable) reserveLocked() (int, error) {
	if t.n >= t.limit {
		return -1, kindapi.Errorf(abi.ELIMIT, "capability table full (%d handles)", t.limit)
	}
	var idx uint32
	if n := len(t.free); n > 0 {
		idx = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		if t.next >= MaxHandles {
			return -1, kindapi.Errorf(abi.ELIMIT, "capability table has no free slot")
		}
		idx = t.next
		ch := t.chunks[idx>>chunkBits].Load()
		if ch == nil {
			ch = new([chunkLen]cell)
			t.chunks[idx>>chunkBits].Store(ch)
		}
		ch[idx&(chunkLen-1)].state.Store(1 << 1) // generation 1, empty
		t.next++
	}
	t.n++
	return int(idx), nil
}

// fill puts e in the slot reserve returned and gives its handle. A blob
// past the table's byte limit is refused (ELIMIT) and the slot freed.
func (t *CapTable) fill(idx int, e entry) (abi.Handle, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fillLocked(idx, e)
}

// Preconditions: t.mu is held.
func (t *CapTable) fillLocked(idx int, e entry) (abi.Handle, error) {
	var size int64
	if e.blob != nil {
		size = int64(e.blob.Len())
		if t.blobLimit > 0 && t.blobBytes+size > t.blobLimit {
			t.unreserveLocked(idx)
			return 0, kindapi.Errorf(abi.ELIMIT, "a %d-byte blob would bring the blobs held to %d bytes, over the task's limit of %d (drop blobs no longer needed)",
				size, t.blobBytes+size, t.blobLimit)
		}
	}
	// The entry first, then the state that makes it found (see cell).
	s := t.cellAt(idx)
	gen := s.state.Load() >> 1
	s.cap.Store(e.cap)
	s.blob.Store(e.blob)
	s.task.Store(e.task)
	s.state.Store(occupied(gen))
	t.blobBytes += size
	return abi.MakeHandle(uint32(idx), gen), nil
}

// unreserve frees a slot reserve returned that was never filled.
func (t *CapTable) unreserve(idx int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unreserveLocked(idx)
}

// Preconditions: t.mu is held.
func (t *CapTable) unreserveLocked(idx int) {
	t.n--
	t.free = append(t.free, uint32(idx))
}

// caps returns every capability in the table.
func (t *CapTable) caps() []*Cap {
	t.mu.Lock()
	defer t.mu.Unlock()
	var cs []*Cap
	for i := range int(t.next) {
		if s := t.cellAt(i); s.state.Load()&1 != 0 {
			if c := s.cap.Load(); c != nil {
				cs = append(cs, c)
			}
		}
	}
	return cs
}

// handleOf returns the handle that names c, if one does.
func (t *CapTable) handleOf(c *Cap) (abi.Handle, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range int(t.next) {
		s := t.cellAt(i)
		if st := s.state.Load(); st&1 != 0 && s.cap.Load() == c {
			return abi.MakeHandle(uint32(i), st>>1), true
		}
	}
	return 0, false
}
