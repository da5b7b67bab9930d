//go:build unix

package sqlitedb

import "syscall"

// Writable reports whether this process may create files in dir.
func Writable(dir string) bool {
	return syscall.Access(dir, 0x2 /* W_OK */) == nil
}
