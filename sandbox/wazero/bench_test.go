package wazero

import (
	"context"
	"testing"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/sandboxtest"
)

// The bodies are sandboxtest's, shared with sandbox/wasmtime, so the two
// engines' figures compare line for line (BENCHMARKS.md).

// BenchmarkWarmSpawn measures one task of a compiled reactor: instantiate,
// _initialize (the Go runtime's start) and a trivial entry.
func BenchmarkWarmSpawn(b *testing.B) {
	for _, bc := range []struct {
		name  string
		opt   options
		limit uint64
	}{
		{"snapshot", options{}, 64 << 20},
		{"snapshot-table", options{noDevirt: true}, 64 << 20},
		{"snapshot-copy", options{image: imageCopy}, 64 << 20},
		{"snapshot-segments", options{image: imageSegments}, 64 << 20},
		{"snapshot-nolimit", options{}, 0},
		{"coalesced", options{noSnapshot: true}, 64 << 20},
		{"coalesced-heap", options{noSnapshot: true, heapMemory: true}, 64 << 20},
		{"coalesced-nolimit", options{noSnapshot: true}, 0},
		{"original", options{noCoalesce: true, noSnapshot: true}, 64 << 20},
	} {
		b.Run(bc.name, func(b *testing.B) {
			sandboxtest.BenchSpawn(b, benchEngine(b, sandbox.Config{}, bc.opt), bc.limit)
		})
	}
}

func BenchmarkCompileCold(b *testing.B) { sandboxtest.BenchCompileCold(b, newDefault) }

func BenchmarkCompileCached(b *testing.B) { sandboxtest.BenchCompileCached(b, newDefault) }

// BenchmarkComputeDeadline runs a compute-bound guest (32 SHA-256 passes
// over 1 MiB) with each way of stopping a guest at its deadline: the
// module rewrite (the default), wazero's CloseOnContextDone (used before),
// and none (for comparison: a spinning guest can not be stopped).
func BenchmarkComputeDeadline(b *testing.B) {
	for _, bc := range []struct {
		name string
		opt  options
	}{
		{"stoppable", options{}},
		{"closeondone", options{preempt: preemptCloseOnDone}},
		{"unstoppable", options{preempt: preemptNone}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			sandboxtest.BenchCompute(b, benchEngine(b, sandbox.Config{CacheDir: testCacheDir}, bc.opt))
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
