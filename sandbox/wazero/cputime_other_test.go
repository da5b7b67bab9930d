//go:build !unix

package wazero

import "time"

func processCPU() time.Duration { return 0 }
