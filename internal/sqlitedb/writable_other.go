//go:build !unix

package sqlitedb

// Writable reports whether this process may create files in dir; where it
// cannot be asked, it assumes so.
func Writable(dir string) bool { return true }

func freeBytes(string) (int64, bool) { return 0, false }
