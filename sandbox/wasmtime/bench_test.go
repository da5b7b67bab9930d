//go:build wasmtime

package wasmtime

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/sandboxtest"
)

// The benchmarks mirror sandbox/wazero's, so the two engines' figures
// compare line for line (BENCHMARKS.md).

// BenchmarkWarmSpawn measures one task of a compiled reactor: a store,
// instantiation, _initialize (the Go runtime's start) and a trivial entry.
func BenchmarkWarmSpawn(b *testing.B) {
	for _, bc := range []struct {
		name  string
		opt   options
		limit uint64
	}{
		{"coalesced", options{}, 64 << 20},
		{"coalesced-nolimit", options{}, 0},
		{"original", options{noCoalesce: true}, 64 << 20},
		{"pooling", options{pooling: true}, 64 << 20},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			e, err := newEngine(ctx, sandbox.Config{CacheDir: testCacheDir}, bc.opt)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close(ctx)
			if err := e.Host("mandate_test", (&sandboxtest.TestHost{}).Funcs()); err != nil {
				b.Fatal(err)
			}
			m, err := e.Compile(ctx, sandboxtest.Guest("reactor"))
			if err != nil {
				b.Fatal(err)
			}
			cfg := sandbox.RunConfig{Name: "bench", Entry: "noop", MemoryLimit: bc.limit}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := processCPU()
			for b.Loop() {
				if err := m.Run(ctx, cfg); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
		})
	}
}

// BenchmarkCompileCold compiles the reactor guest with no cache at all.
func BenchmarkCompileCold(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		e, err := New(ctx, sandbox.Config{})
		if err != nil {
			b.Fatal(err)
		}
		if err := e.Host("mandate_test", (&sandboxtest.TestHost{}).Funcs()); err != nil {
			b.Fatal(err)
		}
		if _, err := e.Compile(ctx, sandboxtest.Guest("reactor")); err != nil {
			b.Fatal(err)
		}
		e.Close(ctx)
	}
}

// BenchmarkCompileCached compiles the reactor guest in a new engine whose
// on-disk cache already holds it (the cost for a fresh process).
func BenchmarkCompileCached(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	warm := func() *Engine {
		e, err := New(ctx, sandbox.Config{CacheDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		if err := e.Host("mandate_test", (&sandboxtest.TestHost{}).Funcs()); err != nil {
			b.Fatal(err)
		}
		if _, err := e.Compile(ctx, sandboxtest.Guest("reactor")); err != nil {
			b.Fatal(err)
		}
		return e
	}
	warm().Close(ctx) // fill the cache
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		warm().Close(ctx)
	}
}

// BenchmarkComputeDeadline runs a compute-bound guest (32 SHA-256 passes
// over 1 MiB) with each preemption mechanism: none (a spinning guest can
// not be stopped), epoch interruption (the default) and fuel metering.
func BenchmarkComputeDeadline(b *testing.B) {
	for _, p := range []preemption{preemptNone, preemptEpoch, preemptFuel} {
		b.Run(p.String(), func(b *testing.B) {
			ctx := context.Background()
			e, err := newEngine(ctx, sandbox.Config{CacheDir: testCacheDir}, options{preempt: p})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close(ctx)
			m, err := e.Compile(ctx, sandboxtest.Guest("compute"))
			if err != nil {
				b.Fatal(err)
			}
			cfg := sandbox.RunConfig{Name: "compute", Stdout: io.Discard}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := processCPU()
			for b.Loop() {
				if err := m.Run(ctx, cfg); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
		})
	}
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
