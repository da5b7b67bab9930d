package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/cputime"
	"github.com/mandatevm/mandate/kernel"
)

// BenchmarkCapCall measures a capability call round trip from a Go guest
// against the no-op operation of the test kind: guest SDK -> host call ->
// bounds checks -> handle lookup -> revocation and op checks -> kind ->
// errno back. The guest makes b.N calls in batches of 100, timing each
// batch with its own clock; p50/p90/p99 are of the per-call time within a
// batch.
func BenchmarkCapCall(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchCapCall(b, kernel.Rate{}) })
	// With a rate on the capability, high enough never to refuse: the
	// cost of the token bucket on every call.
	b.Run("rate", func(b *testing.B) { benchCapCall(b, kernel.Rate{N: 1 << 30, Per: time.Second}) })
}

func benchCapCall(b *testing.B, rate kernel.Rate) {
	e := newEnv(b)
	spec := e.spec(b, "bench-noop", kernel.Limits{}, fmt.Sprintf("%d 100", max(b.N, 100)))
	spec.Entry = "bench"
	spec.Grants[0].Rate = rate
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cputime.Process()
	task, err := e.k.Run(context.Background(), spec)
	if err != nil {
		b.Fatalf("%v\n%s", err, task.Stderr())
	}
	cpu = cputime.Process() - cpu
	b.StopTimer()
	raw, _ := task.Result()
	var m map[string]float64
	if err := json.Unmarshal(raw, &m); err != nil {
		b.Fatalf("result %q: %v", raw, err)
	}
	b.ReportMetric(m["p50_ns"], "p50-ns/call")
	b.ReportMetric(m["p99_ns"], "p99-ns/call")
	b.ReportMetric(m["mean_ns"], "guest-ns/call")
	// The process's CPU time over the task (its start too, a few
	// milliseconds over b.N calls): the steadier figure on a shared
	// machine, where a batch's wall time includes other work's.
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/call")
}

// BenchmarkTaskSpawn measures a whole warm task: a kernel task with one
// grant, running a reactor whose entry does nothing (compiled module
// cached; instantiate, Go runtime init, run, close).
func BenchmarkTaskSpawn(b *testing.B) {
	e := newEnv(b)
	spec := e.spec(b, "bench-noop", kernel.Limits{}, "")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.k.Run(context.Background(), spec); err != nil {
			b.Fatal(err)
		}
	}
}
