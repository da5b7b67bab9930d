package kernel_test

import (
	"context"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/kernel"
)

// BenchmarkRunaway measures how a runaway guest is stopped, on the engine
// of the build (go test -tags wasmtime for wasmtime): each op is one whole
// task, from start to the kernel's verdict.
//
//   - spin: `for {}` under a 100ms timeout; overshoot-ms is how long after
//     its deadline the task was stopped.
//   - membomb: allocating 4 MiB at a time under a 64 MiB memory limit,
//     until growth is refused and the guest dies.
//   - flood: 100 MiB to stdout under a 64 KiB output limit (kept bytes are
//     bounded; the guest runs to the end).
func BenchmarkRunaway(b *testing.B) {
	b.Logf("engine: %s", testengine.Name())
	for _, tc := range []struct {
		name   string
		guest  string
		limits kernel.Limits
		state  kernel.TaskState
	}{
		{"spin", "hostile-spin", kernel.Limits{Timeout: 100 * time.Millisecond}, kernel.TaskTimedOut},
		{"membomb", "hostile-membomb", kernel.Limits{Memory: 64 << 20, Timeout: time.Minute}, kernel.TaskOutOfMemory},
		{"flood", "hostile-flood", kernel.Limits{MaxOutput: 64 << 10, Timeout: time.Minute}, kernel.TaskDone},
	} {
		b.Run(tc.name, func(b *testing.B) {
			e := newEnv(b)
			spec := e.spec(b, tc.guest, tc.limits, "")
			var over time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				task, err := e.k.Run(context.Background(), spec)
				el := time.Since(start)
				if task == nil {
					b.Fatalf("no task: %v", err)
				}
				if task.State() != tc.state {
					b.Fatalf("task ended %s (%v), want %s", task.State(), err, tc.state)
				}
				if tc.limits.Timeout < time.Second {
					over += el - tc.limits.Timeout
				}
			}
			if tc.limits.Timeout < time.Second {
				b.ReportMetric(float64(over.Milliseconds())/float64(b.N), "overshoot-ms")
			}
		})
	}
}
