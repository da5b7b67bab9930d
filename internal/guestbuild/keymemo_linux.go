package guestbuild

import (
	"io/fs"
	"syscall"
)

// statStamp is fi's stamp: device, inode, size, mtime, ctime, file type.
func statStamp(fi fs.FileInfo) (stamp, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return stamp{}, false
	}
	return stamp{Dev: uint64(st.Dev), Ino: uint64(st.Ino), Size: st.Size,
		Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(), Mode: uint32(fi.Mode().Type())}, true
}
