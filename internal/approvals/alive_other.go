//go:build !unix

package approvals

// ProcessAlive reports true for any positive pid: where signals cannot
// ask, a waiter that ended leaves its approval pending until it expires.
func ProcessAlive(pid int) bool { return pid > 0 }
