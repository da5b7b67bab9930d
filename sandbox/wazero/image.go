package wazero

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"

	"github.com/mandatevm/mandate/sandbox/internal/wasmbin"
)

// A module's initial memory, mapped rather than copied.
//
// A task that starts from its module's snapshot (snapshot.go) starts with
// the memory _initialize left: a Go reactor's 3 MB or more, of which a
// task touches a few dozen pages. Compiled with that memory as data
// segments, every instantiation allocates the memory on the Go heap,
// zeroes it, copies the segments in, and leaves it all to the garbage
// collector: most of a task's start (BENCHMARKS.md, issue 31). Instead the
// snapshot's form is compiled without data segments (wasmbin.SplitImage)
// and its image is kept once per form in a sealed memfd; each task's
// memory is a private, copy-on-write mapping of it (image_linux.go): a
// page the task only reads is the image's page, one it writes is copied
// for it alone by the kernel's page fault, and the mapping is dropped
// whole when the instance closes. The memfd is sealed against writes,
// growth and shrinking before any task maps it, so no task's write can
// reach the image or another task: a private mapping's writes never reach
// the file.
//
// A module that starts from no snapshot (built by plain go build, a Rust
// or C tool) gets the same from its data segments: its form is compiled
// without them and they are its image, up to maxPlainImage. Either image is
// kept sparse (imageData): its zero pages are holes in the memfd and absent
// from the module's prepared record (cache.go).
//
// Where memfd or mmap are missing (another OS) or fail (out of mappings),
// or with options.copyImage (to measure one against the other), a task's
// memory is allocated as before and the image copied into it.

// imageMode is how a module's image reaches its tasks.
type imageMode int

const (
	imageMap      imageMode = iota // mapped copy on write (the default)
	imageCopy                      // copied into a memory on the Go heap
	imageSegments                  // data segments, applied by wazero (before issue 31)
)

// splitImage returns what to compile of mod, the image its tasks'
// memories start from, and the image's contents (nil, nil: the module's
// data segments write its memory, as for any module).
func (e *Engine) splitImage(mod []byte) ([]byte, *memImage, *imageData) {
	if e.opt.image == imageSegments {
		return mod, nil, nil
	}
	stripped, image, err := wasmbin.SplitImage(mod)
	if err != nil {
		return mod, nil, nil
	}
	img := sparseImage(image)
	return stripped, newMemImage(img, e.opt.image == imageCopy), img
}

// imageData is a memory image's contents: size bytes, zero but for runs.
// About half of a Go guest's image is zero pages (its heap's unused
// spans, the data segments' gaps): they are never written to the memfd
// (whose holes read as zeros) nor to a module's prepared record.
type imageData struct {
	size uint64
	runs []imageRun // sorted by offset, not overlapping, within size
}

// imageRun is bytes of an image at an offset.
type imageRun struct {
	off uint64
	b   []byte
}

// imagePage is the granule of an image's runs: a host page.
const imagePage = 4096

// sparseImage is b's contents as runs of whole pages that are not all
// zero. The runs are slices of b.
func sparseImage(b []byte) *imageData {
	img := &imageData{size: uint64(len(b))}
	start := -1
	for off := 0; off < len(b); off += imagePage {
		end := min(off+imagePage, len(b))
		zero := true
		for _, c := range b[off:end] {
			if c != 0 {
				zero = false
				break
			}
		}
		switch {
		case !zero && start < 0:
			start = off
		case zero && start >= 0:
			img.runs = append(img.runs, imageRun{off: uint64(start), b: b[start:off]})
			start = -1
		}
	}
	if start >= 0 {
		img.runs = append(img.runs, imageRun{off: uint64(start), b: b[start:]})
	}
	return img
}

// copyTo writes the image's runs into buf, whose first size bytes are
// zero.
func (img *imageData) copyTo(buf []byte) {
	for _, r := range img.runs {
		copy(buf[r.off:], r.b)
	}
}

// bytes is the sum of the runs' lengths.
func (img *imageData) bytes() int {
	n := 0
	for _, r := range img.runs {
		n += len(r.b)
	}
	return n
}

// maxPlainImage bounds the image of a module without a snapshot: the
// image is as large as the memory the module declares (every page of its
// minimum, the data segments written in), and is made when the module is
// compiled, before any task's limit applies. A module declaring more
// starts from its data segments, as wazero applies them.
const maxPlainImage = 64 << 20

// memImage is a form's memory image: its snapshot's, or its data
// segments'.
type memImage struct {
	data *imageData // the image, for the copying path; nil once mapped
	size uint64     // bytes, a whole number of wasm pages

	// mu is held shared while the fd is used (every task's mapping), and
	// exclusively to close it, so a task never maps a closed or reused fd.
	mu sync.RWMutex
	fd int // the sealed memfd; -1 when none (protected by mu once shared)

	// pool holds memories of finished tasks, reset to the image, for the
	// next tasks (image_linux.go, recycle); src is the image mapped read
	// only and shared when the memfd is made, what a reset copies from
	// (nil: no memory is pooled). Both are guarded by poolMu, which is
	// never held while mu is taken; closed is set when the image is
	// released.
	poolMu sync.Mutex
	pool   []*mappedMemory
	src    []byte
	closed bool
	reuses atomic.Uint64 // memories taken from the pool (tests)
}

// newMemImage keeps img as a form's memory image, mapped unless copy is
// set or mapping is unavailable.
func newMemImage(img *imageData, copy bool) *memImage {
	im := &memImage{data: img, size: img.size, fd: -1}
	if !copy {
		if fd, err := sealedMemfd(img); err == nil {
			im.fd, im.data = fd, nil
			im.src = mapReadOnly(fd, im.size)
		}
	}
	return im
}

// Mapped reports whether tasks map the image rather than copy it.
func (im *memImage) mapped() bool {
	im.mu.RLock()
	defer im.mu.RUnlock()
	return im.fd >= 0
}

// close releases the memfd: mappings made of it stay valid (the kernel
// keeps the file while it is mapped).
func (im *memImage) close() {
	im.drainPool()
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.fd >= 0 {
		closeFd(im.fd)
		im.fd = -1
	}
}

// copyInto copies the image into the start of buf, a new memory.
func (im *memImage) copyInto(buf []byte) error {
	if uint64(len(buf)) < im.size {
		return fmt.Errorf("memory of %d bytes for an image of %d", len(buf), im.size)
	}
	if im.data != nil {
		im.data.copyTo(buf)
		return nil
	}
	im.mu.RLock()
	defer im.mu.RUnlock()
	if im.fd < 0 {
		return errors.New("image released")
	}
	return readFd(im.fd, buf[:im.size])
}

// memory returns a task's memory of at most limit bytes starting from the
// image, or nil when the image cannot be mapped (the caller copies).
func (im *memImage) memory(l *memoryLimiter, limit uint64) experimental.LinearMemory {
	im.mu.RLock()
	defer im.mu.RUnlock()
	if im.fd < 0 {
		return nil
	}
	if m := im.pooled(l, limit); m != nil {
		return m
	}
	m, err := mapImage(im.fd, im.size, limit, l)
	if err != nil {
		return nil
	}
	m.im = im
	return m
}
