//go:build unix

package runstore

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive (or, for a probe, shared) lock on f without
// waiting; a probe's lock is released at once.
func lockFile(f *os.File, exclusive bool) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		return err
	}
	if !exclusive {
		return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	}
	return nil
}
