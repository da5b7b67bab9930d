package host

import (
	"os"
	"syscall"
)

// statFile returns f's stamp (digestcache.go).
func statFile(f *os.File) (fileStamp, bool) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return fileStamp{}, false
	}
	return fileStamp{
		dev: uint64(st.Dev), ino: uint64(st.Ino), size: st.Size,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(),
	}, true
}
