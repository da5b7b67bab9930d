//go:build wasmtime && linux

package wasmtime

import (
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pmScanArg is the kernel's struct pm_scan_arg (linux/fs.h).
type pmScanArg struct {
	size, flags, start, end, walkEnd, vec, vecLen, maxPages       uint64
	categoryInverted, categoryMask, categoryAnyofMask, returnMask uint64
}

// pagemapScanIoctl is PAGEMAP_SCAN: _IOWR('f', 16, struct pm_scan_arg).
const pagemapScanIoctl = 3<<30 | uint64(unsafe.Sizeof(pmScanArg{}))<<16 | 'f'<<8 | 16

// pagemapScan reports whether this kernel has the PAGEMAP_SCAN ioctl
// (Linux 6.7 and later), which wasmtime's pooling allocator uses to reset
// only the pages of a slot's resident part that an instance wrote. It
// probes the way wasmtime does: an empty scan of /proc/self/pagemap.
var pagemapScan = sync.OnceValue(func() bool {
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return false
	}
	defer f.Close()
	var region [3]uint64 // one struct page_region
	arg := pmScanArg{vec: uint64(uintptr(unsafe.Pointer(&region))), vecLen: 1, returnMask: 1 << 1}
	arg.size = uint64(unsafe.Sizeof(arg))
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), uintptr(pagemapScanIoctl), uintptr(unsafe.Pointer(&arg)))
	return errno == 0
})
