//go:build !linux

package lifecycle

// RSS is zero where /proc/self/statm does not exist: IdleRSS reports
// nothing then.
func RSS() int64 { return 0 }
