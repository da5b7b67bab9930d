//go:build unix

package sandboxtest

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user+system) the process used so far. Wall
// time is a poor measure on a shared machine; CPU time per op is steadier.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
