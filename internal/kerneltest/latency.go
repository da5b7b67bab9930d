package kerneltest

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchCalls makes warm calls of f, then b.N calls from conc goroutines,
// and reports the calls per second and the p50 and p99 latency ("calls/s",
// "p50-µs", "p99-µs"), for benchmarks of whole calls (a tool call, a
// task's spawn) whose tail matters as much as their mean.
func BenchCalls(b *testing.B, conc, warm int, f func() error) {
	b.Helper()
	for range warm {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	durs := make([]time.Duration, b.N)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range conc {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				t0 := time.Now()
				if err := f(); err != nil {
					b.Error(err)
					return
				}
				durs[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(durs)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
	b.ReportMetric(us(durs[len(durs)/2]), "p50-µs")
	b.ReportMetric(us(durs[min(len(durs)-1, len(durs)*99/100)]), "p99-µs")
}
