//go:build unix

package fleet

import (
	"os"
	"syscall"
)

// lockExclusive takes an exclusive lock on f without waiting: held until
// f is closed or the process ends, however it ends.
func lockExclusive(f *os.File) (bool, error) {
	return true, syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
