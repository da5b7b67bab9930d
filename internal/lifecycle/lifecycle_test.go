package lifecycle

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/mandatevm/mandate/host"
)

var idleTasks = flag.Int("lifecycle.idle", 200, "idle tasks BenchmarkIdleRSS starts")

// newBench is a Bench on a fresh engine named engine (with the shared
// compilation cache of this package's tests), closed when tb ends.
func newBench(tb testing.TB, engine string) *Bench {
	tb.Helper()
	b, err := openBench(tb, engine)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// openBench is newBench, returning its error; the engine is closed when
// owner ends.
func openBench(owner testing.TB, engine string) (*Bench, error) {
	ctx := context.Background()
	eng, err := host.NewEngine(ctx, engine, filepath.Join(os.TempDir(), "mandate-lifecycle-"+engine+"-cache"))
	if err != nil {
		return nil, err
	}
	owner.Cleanup(func() { eng.Close(ctx) })
	return New(ctx, eng)
}

// TestLifecycle runs a few tasks of every guest on every engine of the
// build, one worker and two: each must return its input, declassified.
func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	for _, engine := range host.EngineNames() {
		t.Run(engine, func(t *testing.T) {
			b := newBench(t, engine)
			for _, g := range Guests {
				t.Run(string(g), func(t *testing.T) {
					if err := b.Task(ctx, g); err != nil {
						t.Fatal(err)
					}
					res, err := b.Run(ctx, g, 6, 2)
					if err != nil {
						t.Fatal(err)
					}
					if res.Tasks != 6 || res.Workers != 2 || res.Wall <= 0 {
						t.Errorf("Run = %+v, want 6 tasks on 2 workers", res)
					}
				})
			}
			t.Run("idle", func(t *testing.T) {
				if _, err := b.IdleRSS(ctx, 3); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkLifecycle runs b.N whole tasks (start, one capability call,
// result, teardown) of each guest on each engine of the build (wazero;
// and wasmtime with -tags wasmtime), on 1 and 2 workers. cpu-ns/task is the
// process's CPU time per task (the steady figure on a shared machine),
// tasks/s the throughput in wall time.
func BenchmarkLifecycle(top *testing.B) {
	ctx := context.Background()
	benches := map[string]*Bench{} // by engine, made by the first sub-benchmark that needs it
	warm := map[string]bool{}
	for _, engine := range host.EngineNames() {
		for _, g := range Guests {
			for _, workers := range []int{1, 2} {
				top.Run(fmt.Sprintf("%s/%s/workers=%d", engine, g, workers), func(b *testing.B) {
					bench := benches[engine]
					if bench == nil {
						var err error
						if bench, err = openBench(top, engine); err != nil {
							b.Fatal(err)
						}
						benches[engine] = bench
					}
					if key := engine + "/" + string(g); !warm[key] {
						// Fault memory in and fill the engine's caches first.
						if _, err := bench.Run(ctx, g, 20, 2); err != nil {
							b.Fatal(err)
						}
						warm[key] = true
					}
					b.ReportAllocs()
					b.ResetTimer()
					res, err := bench.Run(ctx, g, b.N, workers)
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if res.CPU > 0 {
						b.ReportMetric(float64(res.CPUPerTask().Nanoseconds()), "cpu-ns/task")
					}
					b.ReportMetric(res.TasksPerSecond(), "tasks/s")
				})
			}
		}
	}
}

// BenchmarkIdleRSS starts -lifecycle.idle idle Go tasks (the reactor's
// runtime started, the guest asleep) per op on each engine and reports the
// growth of the process's resident set per task. Run it alone, at 1x, so
// that no other benchmark's memory is in the figure.
func BenchmarkIdleRSS(b *testing.B) {
	ctx := context.Background()
	for _, engine := range host.EngineNames() {
		b.Run(engine, func(b *testing.B) {
			bench := newBench(b, engine)
			var sum float64
			for b.Loop() {
				per, err := bench.IdleRSS(ctx, *idleTasks)
				if err != nil {
					b.Fatal(err)
				}
				sum += per
			}
			b.ReportMetric(sum/float64(b.N)/(1<<20), "MiB/task")
		})
	}
}
