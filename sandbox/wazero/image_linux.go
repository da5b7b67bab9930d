//go:build linux

package wazero

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sealedMemfd returns a memfd holding img, sealed against every change.
// Only img's runs are written: the rest of the file is holes, which read
// as zeros and take no memory until a task reads them.
func sealedMemfd(img *imageData) (int, error) {
	fd, err := unix.MemfdCreate("mandate-image", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, err
	}
	ok := false
	defer func() {
		if !ok {
			unix.Close(fd)
		}
	}()
	if err := unix.Ftruncate(fd, int64(img.size)); err != nil {
		return -1, err
	}
	for _, r := range img.runs {
		for off := 0; off < len(r.b); {
			n, err := unix.Pwrite(fd, r.b[off:], int64(r.off)+int64(off))
			if err != nil {
				return -1, err
			}
			if n == 0 {
				return -1, fmt.Errorf("memfd: short write")
			}
			off += n
		}
	}
	seals := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		return -1, err
	}
	ok = true
	return fd, nil
}

func closeFd(fd int) { unix.Close(fd) }

// mapReadOnly maps size bytes of fd shared and read only (nil when it
// cannot): what a reset copies the image from.
func mapReadOnly(fd int, size uint64) []byte {
	b, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil
	}
	return b
}

// readFd fills b from the start of fd.
func readFd(fd int, b []byte) error {
	for off := 0; off < len(b); {
		n, err := unix.Pread(fd, b[off:], int64(off))
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("memfd: short read")
		}
		off += n
	}
	return nil
}

// mappedMemory is a task's linear memory: a reservation of limit bytes of
// address space, inaccessible, with the image mapped privately (copy on
// write) over its start and anonymous zero pages made accessible past it
// as the memory grows. Its address never changes, and nothing of it is on
// the Go heap.
type mappedMemory struct {
	l       *memoryLimiter
	im      *memImage // the image it maps, nil for none
	region  []byte    // the whole reservation
	limit   uint64
	size    uint64 // accessible bytes
	imgSize uint64
	pm      []byte // pagemap entries, read by reset (kept for the next)
}

// mapImage maps a task's memory starting from the image in fd.
func mapImage(fd int, imgSize, limit uint64, l *memoryLimiter) (*mappedMemory, error) {
	if imgSize > limit {
		return nil, fmt.Errorf("image of %d bytes past the limit of %d", imgSize, limit)
	}
	resv := max(limit, 1<<16)
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(resv), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, err
	}
	region := unsafe.Slice((*byte)(p), resv)
	if imgSize > 0 {
		if _, err := unix.MmapPtr(fd, 0, p, uintptr(imgSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_FIXED); err != nil {
			unix.MunmapPtr(p, uintptr(resv))
			return nil, err
		}
	}
	return &mappedMemory{l: l, region: region, limit: limit, size: imgSize, imgSize: imgSize}, nil
}

// Reallocate implements experimental.LinearMemory: within the reservation
// the memory never moves; pages past the image are anonymous, hence zero.
func (m *mappedMemory) Reallocate(size uint64) []byte {
	if m.region == nil {
		return nil
	}
	if size > m.limit {
		m.l.refused.Store(true)
		return nil
	}
	if size > m.size {
		if err := unix.Mprotect(m.region[m.size:size], unix.PROT_READ|unix.PROT_WRITE); err != nil {
			m.l.refused.Store(true)
			return nil
		}
		m.size = size
	}
	return m.region[:size:size]
}

// Free implements experimental.LinearMemory: a memory of an image goes
// back to the image's pool, reset, when there is room; any other is
// unmapped.
func (m *mappedMemory) Free() {
	if m.region != nil && m.im != nil && m.im.recycle(m) {
		return
	}
	m.unmap()
}

func (m *mappedMemory) unmap() {
	if m.region != nil {
		unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(m.region)), uintptr(len(m.region)))
		m.region = nil
	}
}

// A finished task's memory, reset, for the next task of the same image.
//
// Unmapping a task's memory and mapping the next one costs a whole
// reservation's page tables, and every page the next task touches faults
// again: on this project's VMs a page fault is a trip through the
// hypervisor, and faults were a third of a Go task's CPU (BENCHMARKS.md,
// issue 31). So a memory goes back to its image's pool instead, reset to
// exactly what a fresh mapping would show:
//
//   - past the image (what the task grew), the pages are cleared (the
//     first keepGrown bytes' present pages, in place) or dropped (the
//     rest: MADV_DONTNEED, anonymous, so they read as zeros again), and
//     made inaccessible again;
//   - within the image, every page the task wrote is a private copy, and
//     every other page is still the image's own (the memfd is sealed
//     against writes). /proc/self/pagemap says which is which: a page
//     present and not file-backed, or swapped out, is a private copy, and
//     it is overwritten with the image's bytes; it stays private, so the
//     next task writing it does not fault. When pagemap cannot be read
//     every page of the image is dropped instead (back to the file).
//
// The next task then sees the image and nothing of the last task
// (TestImageReuseReset). At most poolSize memories are kept per image;
// the pool is emptied when the image is released.

// poolSize is the most memories an image keeps for reuse.
var poolSize = min(max(2*runtime.GOMAXPROCS(0), 2), 16)

// pooled returns a memory from the pool for a task of limiter l and limit,
// or nil for none.
func (im *memImage) pooled(l *memoryLimiter, limit uint64) *mappedMemory {
	resv := max(limit, 1<<16)
	im.poolMu.Lock()
	defer im.poolMu.Unlock()
	for i := len(im.pool) - 1; i >= 0; i-- {
		m := im.pool[i]
		if uint64(len(m.region)) == resv {
			im.pool = append(im.pool[:i], im.pool[i+1:]...)
			m.l, m.limit = l, limit
			im.reuses.Add(1)
			return m
		}
	}
	return nil
}

// recycle resets m and keeps it in the pool; false when it cannot (the
// caller unmaps it).
func (im *memImage) recycle(m *mappedMemory) bool {
	im.poolMu.Lock()
	defer im.poolMu.Unlock()
	if im.closed || im.src == nil || len(im.pool) >= poolSize {
		return false
	}
	if err := m.reset(im.src); err != nil {
		return false
	}
	m.l = nil
	im.pool = append(im.pool, m)
	return true
}

// drainPool unmaps every pooled memory and the image's read-only view;
// nothing is pooled after it.
func (im *memImage) drainPool() {
	im.poolMu.Lock()
	defer im.poolMu.Unlock()
	im.closed = true
	for _, m := range im.pool {
		m.unmap()
	}
	im.pool = nil
	if im.src != nil {
		unix.Munmap(im.src)
		im.src = nil
	}
}

// reset makes m what mapImage returned: the image's bytes, and nothing
// accessible past them (see above). One read of pagemap covers the image
// and the first keepGrown bytes the task grew: within the image a private
// page is overwritten with the image's bytes; past it a present page is
// cleared in place and stays resident, so the next task growing as far
// writes it without a fault (a Go command from a snapshot grows by the
// same pages on every task: 65 faults a task, a third of an MCP tool
// call, BENCHMARKS.md). A swapped-out grown page, every page past
// keepGrown, and every page at all when pagemap cannot be read, are
// dropped instead (MADV_DONTNEED: the image's pages go back to the file,
// grown ones read as zeros).
func (m *mappedMemory) reset(image []byte) error {
	kept := min(m.size, m.imgSize+keepGrown)
	if m.size > kept {
		if err := unix.Madvise(m.region[kept:m.size], unix.MADV_DONTNEED); err != nil {
			return err
		}
	}
	if kept > 0 {
		if err := m.restore(m.region[:kept], image); err != nil {
			return err
		}
	}
	if m.size > m.imgSize {
		if err := unix.Mprotect(m.region[m.imgSize:m.size], unix.PROT_NONE); err != nil {
			return err
		}
		m.size = m.imgSize
	}
	return nil
}

// restore is reset's part of b, the start of m's region: the image's
// pages as the image has them, the grown ones zero.
func (m *mappedMemory) restore(b, image []byte) error {
	entries, err := readPagemap(b, m.pm)
	if err != nil {
		return unix.Madvise(b, unix.MADV_DONTNEED)
	}
	m.pm = entries
	for i := range len(b) / pageSize {
		off := i * pageSize
		page := b[off : off+pageSize]
		switch e := binary.LittleEndian.Uint64(entries[8*i:]); {
		case uint64(off) < m.imgSize:
			if private(e) {
				copy(page, image[off:off+pageSize])
			}
		case e&pmSwapped != 0:
			if err := unix.Madvise(page, unix.MADV_DONTNEED); err != nil {
				return err
			}
		case e&pmPresent != 0:
			clear(page)
		}
	}
	return nil
}

// keepGrown is how many bytes past its image a pooled memory keeps
// resident (cleared) for the next task: with poolSize memories an image
// holds at most 16 x 2 MiB this way.
var keepGrown uint64 = 2 << 20

const pageSize = 4096

var pagemap struct {
	once sync.Once
	f    *os.File
	err  error
}

// Bits of a /proc/self/pagemap entry (Documentation/admin-guide/mm/pagemap.rst).
const (
	pmPresent = 1 << 63
	pmSwapped = 1 << 62
	pmFile    = 1 << 61 // file-page or shared-anon
)

// private reports whether a pagemap entry is a private copy of a page of
// a file mapping: present and not the file's, or swapped.
func private(e uint64) bool { return e&pmSwapped != 0 || e&pmPresent != 0 && e&pmFile == 0 }

// readPagemap returns the pagemap entries of b's pages (b page aligned, a
// whole number of pages), 8 bytes each, in buf when it is large enough.
func readPagemap(b, buf []byte) ([]byte, error) {
	if os.Getpagesize() != pageSize || len(b)%pageSize != 0 {
		return nil, fmt.Errorf("page size %d", os.Getpagesize())
	}
	pagemap.once.Do(func() { pagemap.f, pagemap.err = os.Open("/proc/self/pagemap") })
	if pagemap.err != nil {
		return nil, pagemap.err
	}
	n := 8 * (len(b) / pageSize)
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	base := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if _, err := pagemap.f.ReadAt(buf, int64(base/pageSize)*8); err != nil {
		return nil, err
	}
	return buf, nil
}
