package kernel

import (
	"sync"

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

type slot struct {
	gen     uint32 // generation of the current (or next) occupant; 0 = retired
	entry   entry
	used    bool
	retired bool
}

// CapTable is a task's table of handles, like a process's file descriptor
// table. A handle is the slot index plus the slot's generation, so a handle
// kept after its entry was removed (a stale handle) never names the slot's
// next occupant: it is simply not found.
//
// CapTable is safe for concurrent use.
type CapTable struct {
	mu    sync.Mutex
	slots []slot // protected by mu
	free  []uint32
	n     int // live entries; protected by mu
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
	e, ok := t.get(h)
	switch {
	case !ok:
		return nil, kindapi.Errorf(abi.EBADHANDLE, "handle %#x is not in this task's table", uint32(h))
	case e.task == nil:
		return nil, kindapi.Errorf(abi.EWRONGTYPE, "handle %#x does not name a task", uint32(h))
	}
	return e.task, nil
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

// lookup returns the entry h names.
//
// Preconditions: t.mu is held.
func (t *CapTable) lookup(h abi.Handle) (*slot, bool) {
	idx := h.Index()
	if h == 0 || int(idx) >= len(t.slots) {
		return nil, false
	}
	s := &t.slots[idx]
	if !s.used || s.gen != h.Gen() {
		return nil, false
	}
	return s, true
}

func (t *CapTable) get(h abi.Handle) (entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.lookup(h)
	if !ok {
		return entry{}, false
	}
	return s.entry, true
}

// GetCap returns the capability h names: kindapi.ErrBadHandle when h is not
// in this table, kindapi.ErrWrongType when it names a blob.
func (t *CapTable) GetCap(h abi.Handle) (*Cap, error) {
	e, ok := t.get(h)
	switch {
	case !ok:
		return nil, kindapi.Errorf(abi.EBADHANDLE, "handle %#x is not in this task's table", uint32(h))
	case e.cap == nil:
		return nil, kindapi.Errorf(abi.EWRONGTYPE, "handle %#x does not name a capability", uint32(h))
	}
	return e.cap, nil
}

// GetBlob returns the blob h names: kindapi.ErrBadHandle when h is not in
// this table, kindapi.ErrWrongType when it names a capability.
func (t *CapTable) GetBlob(h abi.Handle) (*kindapi.Blob, error) {
	e, ok := t.get(h)
	switch {
	case !ok:
		return nil, kindapi.Errorf(abi.EBADHANDLE, "handle %#x is not in this task's table", uint32(h))
	case e.blob == nil:
		return nil, kindapi.Errorf(abi.EWRONGTYPE, "handle %#x does not name a blob", uint32(h))
	}
	return e.blob, nil
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
	e := s.entry
	s.entry, s.used = entry{}, false
	t.n--
	if e.blob != nil {
		t.blobBytes -= int64(e.blob.Len())
	}
	if s.gen >= abi.MaxGen {
		s.retired = true
	} else {
		s.gen++
		t.free = append(t.free, h.Index())
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
		if len(t.slots) >= MaxHandles {
			return -1, kindapi.Errorf(abi.ELIMIT, "capability table has no free slot")
		}
		idx = uint32(len(t.slots))
		t.slots = append(t.slots, slot{gen: 1})
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
	s := &t.slots[idx]
	s.entry, s.used = e, true
	t.blobBytes += size
	return abi.MakeHandle(uint32(idx), s.gen), nil
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
	for i := range t.slots {
		if s := &t.slots[i]; s.used && s.entry.cap != nil {
			cs = append(cs, s.entry.cap)
		}
	}
	return cs
}
