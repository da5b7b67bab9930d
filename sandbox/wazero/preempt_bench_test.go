package wazero

import (
	"context"
	"errors"
	"math"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/wasmasm"
	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/sandboxtest"
)

// BenchmarkPreemptGap measures how long a guest that never calls the host
// can keep the Go runtime from stopping the world: each op runs one guest
// for 300 ms (2 s for the pointer chase) while the benchmark calls
// runtime.GC() again and again, and
// reports the median, the 99th percentile and the longest of the
// collections' stop-the-world stopping latency (runtime/metrics
// /sched/pauses/stopping/gc:seconds), which is how long the runtime waited
// for the guest's next call into Go. The guests are shapes chosen to make
// the gap between exits long: the cheapest loop, Go's for {}, a chain of
// dependent loads missing the cache, a chain of 64-bit divisions, a loop
// of memory.fill, loop-free recursion and a long straight-line body.
func BenchmarkPreemptGap(b *testing.B) {
	guests := []struct {
		name, entry string
		wasm        []byte
		timeout     time.Duration
	}{
		{"loop", "run", sandboxtest.SpinModule(), 300 * time.Millisecond},
		{"go-for", "", sandboxtest.Guest("spin"), 300 * time.Millisecond},
		{"compute", "", sandboxtest.Guest("compute"), 300 * time.Millisecond},
		// Most of the first 300 ms is building the chain.
		{"pointer-chase", "run", chaseModule(), 2 * time.Second},
		{"div-chain", "run", divModule(), 300 * time.Millisecond},
		{"memory-fill", "run", fillModule(), 300 * time.Millisecond},
		{"recursion", "run", sandboxtest.FanoutModule(0), 300 * time.Millisecond},
		{"straight-line", "run", sandboxtest.FanoutModule(20_000), 300 * time.Millisecond},
	}
	for _, p := range []struct {
		name string
		opt  options
	}{
		{"rewrite", options{}},
		{"closeondone", options{preempt: preemptCloseOnDone}},
	} {
		e := benchEngine(b, sandbox.Config{CacheDir: testCacheDir}, p.opt)
		for _, g := range guests {
			if p.opt.preempt == preemptCloseOnDone && (g.name == "recursion" || g.name == "straight-line") {
				// WithCloseOnContextDone checks only at loop headers: it
				// never stops a guest without loops, and the first
				// collection waits for it forever.
				continue
			}
			b.Run(p.name+"/"+g.name, func(b *testing.B) {
				m, err := e.Compile(context.Background(), g.wasm)
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close(context.Background())
				var l latency
				for b.Loop() {
					l = l.max(stopLatency(b, m, sandbox.RunConfig{Name: g.name, Entry: g.entry, Timeout: g.timeout}))
				}
				l.report(b)
			})
		}
	}
}

const stoppingGC = "/sched/pauses/stopping/gc:seconds"

// latency is a distribution's median, 99th percentile and maximum (each
// the upper bound of its histogram bucket).
type latency struct{ p50, p99, worst time.Duration }

func (l latency) max(o latency) latency {
	return latency{max(l.p50, o.p50), max(l.p99, o.p99), max(l.worst, o.worst)}
}

func (l latency) report(b *testing.B) {
	b.ReportMetric(float64(l.p50.Microseconds()), "p50-stop-µs")
	b.ReportMetric(float64(l.p99.Microseconds()), "p99-stop-µs")
	b.ReportMetric(float64(l.worst.Microseconds()), "max-stop-µs")
}

// stopLatency runs m under cfg while collecting garbage again and again,
// and returns the collections' stopping latency during the run.
func stopLatency(b *testing.B, m sandbox.Module, cfg sandbox.RunConfig) (l latency) {
	sample := []metrics.Sample{{Name: stoppingGC}}
	metrics.Read(sample)
	before := append([]uint64(nil), sample[0].Value.Float64Histogram().Counts...) // Read reuses it
	done := make(chan error, 1)
	go func() { done <- m.Run(context.Background(), cfg) }()
	var err error
loop:
	for {
		select {
		case err = <-done:
			break loop
		default:
			runtime.GC()
		}
	}
	if err != nil && !errors.Is(err, sandbox.ErrTimeout) {
		b.Fatalf("Run = %v", err)
	}
	metrics.Read(sample)
	after := sample[0].Value.Float64Histogram()
	var total uint64
	counts := make([]uint64, len(after.Counts))
	for i := range after.Counts {
		counts[i] = after.Counts[i] - before[i]
		total += counts[i]
	}
	// Bucket i holds [Buckets[i], Buckets[i+1]); report its upper bound.
	upper := func(i int) time.Duration {
		if v := after.Buckets[i+1]; !math.IsInf(v, 1) {
			return time.Duration(v * 1e9)
		}
		return time.Duration(after.Buckets[i] * 1e9)
	}
	var seen uint64
	for i, c := range counts {
		if c == 0 {
			continue
		}
		seen += c
		l.worst = upper(i)
		if l.p50 == 0 && seen*2 >= total {
			l.p50 = upper(i)
		}
		if l.p99 == 0 && seen*100 >= total*99 {
			l.p99 = upper(i)
		}
	}
	return l
}

// chaseModule's "run" follows a chain of loads through 256 MiB of memory
// in the order of a full-period linear congruential generator, so that
// every load misses the cache and depends on the one before: the slowest
// an instruction gets without being a bulk operation.
func chaseModule() []byte {
	const slots = 64 << 20 // 4-byte slots
	body := wasmasm.Cat(
		[]byte{0x01, 0x02, 0x7f}, // locals: i, p
		// do { mem[i*4] = ((i*a + c) & (slots-1)) * 4 } while (++i != slots)
		[]byte{0x03, 0x40},
		[]byte{0x20, 0x00, 0x41, 0x02, 0x74},                             // i << 2
		[]byte{0x20, 0x00, 0x41}, wasmasm.Sleb(1103515245), []byte{0x6c}, // i * a
		[]byte{0x41}, wasmasm.Sleb(12345), []byte{0x6a}, // + c
		[]byte{0x41}, wasmasm.Sleb(slots-1), []byte{0x71}, // & (slots-1)
		[]byte{0x41, 0x02, 0x74, 0x36, 0x02, 0x00},                                                                  // << 2; i32.store
		[]byte{0x20, 0x00, 0x41, 0x01, 0x6a, 0x22, 0x00, 0x41}, wasmasm.Sleb(slots), []byte{0x47, 0x0d, 0x00, 0x0b}, // ++i != slots: br_if 0
		// for { p = mem[p] }
		[]byte{0x03, 0x40, 0x20, 0x01, 0x28, 0x02, 0x00, 0x21, 0x01, 0x0c, 0x00, 0x0b},
		[]byte{0x41, 0x00, 0x0b},
	)
	return runModule(body, 4096)
}

// divModule's "run" divides a 64-bit number forever, each division
// depending on the one before.
func divModule() []byte {
	body := wasmasm.Cat(
		[]byte{0x01, 0x01, 0x7e}, // local x i64
		[]byte{0x42}, wasmasm.Sleb(math.MaxInt64), []byte{0x21, 0x00},
		[]byte{0x03, 0x40},
		[]byte{0x20, 0x00, 0x42, 0x03, 0x80},                                     // x / 3 (unsigned)
		[]byte{0x42}, wasmasm.Sleb(0x7000000000000000), []byte{0x84, 0x21, 0x00}, // | 0x7000...; x =
		[]byte{0x0c, 0x00, 0x0b},
		[]byte{0x41, 0x00, 0x0b},
	)
	return runModule(body, 1)
}

// fillModule's "run" fills its 64 MiB of memory forever.
func fillModule() []byte {
	body := wasmasm.Cat(
		[]byte{0x00, 0x03, 0x40},
		[]byte{0x41, 0x00, 0x41, 0x01, 0x41}, wasmasm.Sleb(64<<20), []byte{0xfc, 0x0b, 0x00}, // memory.fill(0, 1, 64 MiB)
		[]byte{0x0c, 0x00, 0x0b},
		[]byte{0x41, 0x00, 0x0b},
	)
	return runModule(body, 1024)
}

// runModule is a reactor with pages of memory whose entry "run", of type
// () -> i32, has body (locals, code and end).
func runModule(body []byte, pages uint64) []byte {
	return wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec([]byte{0x60, 0x00, 0x01, 0x7f})),
		wasmasm.Section(3, wasmasm.Vec([]byte{0x00})),
		wasmasm.Section(5, wasmasm.Cat([]byte{0x01, 0x00}, wasmasm.Uleb(pages))),
		wasmasm.Section(7, wasmasm.Vec(append(wasmasm.Name("run"), 0x00, 0x00))),
		wasmasm.Section(10, wasmasm.Vec(wasmasm.Cat(wasmasm.Uleb(uint64(len(body))), body))),
	)
}

// BenchmarkPreemptCheck measures what one check costs: a loop of 20
// million iterations of five instructions (count down, branch back) with
// no check (unstoppable), the rewrite's check at its header, the rewrite
// with a budget of 1 (so every check calls into Go: what a yield costs),
// and WithCloseOnContextDone's call into Go at every loop header.
func BenchmarkPreemptCheck(b *testing.B) {
	const n = 20_000_000
	body := wasmasm.Cat(
		[]byte{0x01, 0x01, 0x7f}, // local i
		[]byte{0x41}, wasmasm.Sleb(n), []byte{0x21, 0x00},
		[]byte{0x03, 0x40, 0x20, 0x00, 0x41, 0x01, 0x6b, 0x22, 0x00, 0x0d, 0x00, 0x0b}, // do {} while (--i)
		[]byte{0x41, 0x00, 0x0b},
	)
	wasm := runModule(body, 1)
	for _, p := range []struct {
		name string
		opt  options
	}{
		{"unstoppable", options{preempt: preemptNone}},
		{"rewrite", options{}},
		{"rewrite-yield-every-check", options{preemptBudget: 1}},
		{"closeondone", options{preempt: preemptCloseOnDone}},
	} {
		b.Run(p.name, func(b *testing.B) {
			e := benchEngine(b, sandbox.Config{}, p.opt)
			m, err := e.Compile(context.Background(), wasm)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := m.Run(context.Background(), sandbox.RunConfig{Entry: "run"}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/iteration")
		})
	}
}
