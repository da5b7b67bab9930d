//go:build !unix

package cputime

import "time"

// Process is zero where getrusage does not exist: callers report no CPU
// figure then.
func Process() time.Duration { return 0 }
