//go:build unix

package approvals

import (
	"errors"
	"syscall"
)

// ProcessAlive reports whether process pid runs on this machine: signal
// 0 reaches it, or it exists and is another user's (EPERM). A PID reused
// by another process since reads as alive: the approval then stays
// pending until it expires, and an answer to it reaches nobody.
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
