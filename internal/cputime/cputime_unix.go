//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Process is the CPU time (user+system, every thread, the garbage
// collector's included) the process used so far, from getrusage; zero when
// it can not be read.
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
