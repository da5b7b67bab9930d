//go:build wasmtime

package wasmtime

import (
	"context"
	"testing"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/internal/wasmbin"
	"github.com/mandatevm/mandate/sandbox/sandboxtest"
)

// The bodies are sandboxtest's, shared with sandbox/wazero, so the two
// engines' figures compare line for line (BENCHMARKS.md).

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
		{"ondemand", options{onDemand: true}, 64 << 20},
	} {
		b.Run(bc.name, func(b *testing.B) {
			sandboxtest.BenchSpawn(b, benchEngine(b, sandbox.Config{CacheDir: testCacheDir}, bc.opt), bc.limit)
		})
	}
}

func BenchmarkCompileCold(b *testing.B) { sandboxtest.BenchCompileCold(b, newDefault) }

func BenchmarkCompileCached(b *testing.B) { sandboxtest.BenchCompileCached(b, newDefault) }

// BenchmarkCompileColdGrowth compiles the reactor guest with and without
// the memory.grow rewrite (wasmbin.TrackGrowth) that lets Run report the
// memory limit; BenchmarkTrackGrowth is the rewrite alone.
func BenchmarkCompileColdGrowth(b *testing.B) {
	for _, bc := range []struct {
		name string
		opt  options
	}{
		{"tracked", options{}},
		{"untracked", options{noTrackGrowth: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			sandboxtest.BenchCompileCold(b, func(cfg sandbox.Config) (sandbox.Engine, error) {
				return newEngine(context.Background(), cfg, bc.opt)
			})
		})
	}
}

func BenchmarkTrackGrowth(b *testing.B) {
	wasm := sandboxtest.Guest("reactor")
	b.SetBytes(int64(len(wasm)))
	b.ReportAllocs()
	for b.Loop() {
		if _, n, err := wasmbin.TrackGrowth(wasm); err != nil || n == 0 {
			b.Fatalf("TrackGrowth = %d, %v", n, err)
		}
	}
}

// BenchmarkComputeDeadline runs a compute-bound guest (32 SHA-256 passes
// over 1 MiB) with each preemption mechanism: none (a spinning guest can
// not be stopped), epoch interruption (the default) and fuel metering.
func BenchmarkComputeDeadline(b *testing.B) {
	for _, p := range []preemption{preemptNone, preemptEpoch, preemptFuel} {
		b.Run(p.String(), func(b *testing.B) {
			sandboxtest.BenchCompute(b, benchEngine(b, sandbox.Config{CacheDir: testCacheDir}, options{preempt: p}))
		})
	}
}

func newDefault(cfg sandbox.Config) (sandbox.Engine, error) { return New(context.Background(), cfg) }

// benchEngine starts an engine with options, closed when b ends.
func benchEngine(b *testing.B, cfg sandbox.Config, opt options) sandbox.Engine {
	ctx := context.Background()
	e, err := newEngine(ctx, cfg, opt)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close(ctx) })
	return e
}

// BenchmarkNewEngine measures making and closing an engine (WASI defined,
// no cache) with each allocator: the pool reserves its address space up
// front, which a short process such as mandate run pays once.
func BenchmarkNewEngine(b *testing.B) {
	for _, bc := range []struct {
		name string
		opt  options
	}{
		{"pooling", options{}},
		{"ondemand", options{onDemand: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				e, err := newEngine(ctx, sandbox.Config{}, bc.opt)
				if err != nil {
					b.Fatal(err)
				}
				e.Close(ctx)
			}
		})
	}
}
