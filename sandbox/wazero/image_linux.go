//go:build linux

package wazero

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sealedMemfd returns a memfd holding b, sealed against every change.
func sealedMemfd(b []byte) (int, error) {
	fd, err := unix.MemfdCreate("mandate-snapshot", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, err
	}
	ok := false
	defer func() {
		if !ok {
			unix.Close(fd)
		}
	}()
	if err := unix.Ftruncate(fd, int64(len(b))); err != nil {
		return -1, err
	}
	for off := 0; off < len(b); {
		n, err := unix.Pwrite(fd, b[off:], int64(off))
		if err != nil {
			return -1, err
		}
		if n == 0 {
			return -1, fmt.Errorf("memfd: short write")
		}
		off += n
	}
	seals := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		return -1, err
	}
	ok = true
	return fd, nil
}

func closeFd(fd int) { unix.Close(fd) }

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
	region  []byte // the whole reservation
	limit   uint64
	size    uint64 // accessible bytes
	imgSize uint64
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

// Free implements experimental.LinearMemory.
func (m *mappedMemory) Free() {
	if m.region != nil {
		unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(m.region)), uintptr(len(m.region)))
		m.region = nil
	}
}
