//go:build unix

package sqlitedb

import "syscall"

// Writable reports whether this process may create files in dir.
func Writable(dir string) bool {
	return syscall.Access(dir, 0x2 /* W_OK */) == nil
}

// freeBytes is the space an unprivileged process may still use on the
// filesystem holding dir.
func freeBytes(dir string) (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}
