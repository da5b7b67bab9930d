package sandboxtest

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/mandatevm/mandate/sandbox"
)

// The benchmark bodies both engines share, so their figures compare line
// for line (BENCHMARKS.md). Each engine's bench_test.go chooses the
// variants (options only it has) and calls these.

// BenchSpawn measures one task of the reactor guest on e: instantiation,
// _initialize (the Go runtime's start) and a trivial entry, with memory
// limit limit (0: the engine's default).
func BenchSpawn(b *testing.B, e sandbox.Engine, limit uint64) {
	ctx := context.Background()
	if err := e.Host("mandate_test", (&TestHost{}).Funcs()); err != nil {
		b.Fatal(err)
	}
	m, err := e.Compile(ctx, Guest("reactor"))
	if err != nil {
		b.Fatal(err)
	}
	cfg := sandbox.RunConfig{Name: "bench", Entry: "noop", MemoryLimit: limit}
	// The first task's init is the module's snapshot: measure the tasks
	// after it.
	if err := m.Run(ctx, cfg); err != nil {
		b.Fatal(err)
	}
	Settled(b, m)
	benchRuns(b, m, cfg)
}

// BenchCompute runs the compute guest (32 SHA-256 passes over 1 MiB) on e.
func BenchCompute(b *testing.B, e sandbox.Engine) {
	m, err := e.Compile(context.Background(), Guest("compute"))
	if err != nil {
		b.Fatal(err)
	}
	benchRuns(b, m, sandbox.RunConfig{Name: "compute", Stdout: io.Discard})
}

func benchRuns(b *testing.B, m sandbox.Module, cfg sandbox.RunConfig) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for b.Loop() {
		if err := m.Run(ctx, cfg); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
}

// BenchCompileCold compiles the reactor guest in a new engine with no cache.
func BenchCompileCold(b *testing.B, newEngine func(sandbox.Config) (sandbox.Engine, error)) {
	b.ReportAllocs()
	for b.Loop() {
		compileReactor(b, newEngine, sandbox.Config{}).Close(context.Background())
	}
}

// BenchCompileCached compiles the reactor guest in a new engine whose
// on-disk cache already holds it (the cost for a fresh process).
func BenchCompileCached(b *testing.B, newEngine func(sandbox.Config) (sandbox.Engine, error)) {
	cfg := sandbox.Config{CacheDir: b.TempDir()}
	compileReactor(b, newEngine, cfg).Close(context.Background()) // fill the cache
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		compileReactor(b, newEngine, cfg).Close(context.Background())
	}
}

func compileReactor(b *testing.B, newEngine func(sandbox.Config) (sandbox.Engine, error), cfg sandbox.Config) sandbox.Engine {
	e, err := newEngine(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := e.Host("mandate_test", (&TestHost{}).Funcs()); err != nil {
		b.Fatal(err)
	}
	if _, err := e.Compile(context.Background(), Guest("reactor")); err != nil {
		b.Fatal(err)
	}
	return e
}

// reportCPU reports the process CPU time per op since start (including the
// garbage collector's work), which a busy machine disturbs less than wall
// time.
func reportCPU(b *testing.B, start time.Duration) {
	if start == 0 || b.N == 0 {
		return
	}
	b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
}
