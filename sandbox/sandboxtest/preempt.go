package sandboxtest

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/wasmasm"
	"github.com/mandatevm/mandate/sandbox"
)

// Runaway guests that never call the host, each in a shape that once got
// past a way of stopping guests: a loop, recursion without any loop, and a
// long straight-line body entered again and again.

// SpinModule is a reactor whose entry "run" is "loop br 0 end".
func SpinModule() []byte {
	return reactorModule(nil, []byte{0x03, 0x40, 0x0c, 0x00, 0x0b, 0x41, 0x00}) // loop br 0 end; i32.const 0
}

// FanoutModule is a reactor whose entry "run" calls f(62), where
// f(n) = n == 0 ? leaf : f(n-1) + f(n-1): 2^62 calls, never more than 63
// deep, and no loop anywhere. The leaf runs straight-line code of body
// increments of a word in memory (six instructions each) before it
// returns 1.
func FanoutModule(body int) []byte {
	leaf := make([]byte, 0, body*11+2)
	for range body {
		// i32.const 0; i32.const 0; i32.load; i32.const 1; i32.add; i32.store
		leaf = append(leaf, 0x41, 0x00, 0x41, 0x00, 0x28, 0x02, 0x00, 0x41, 0x01, 0x6a, 0x36, 0x02, 0x00)
	}
	leaf = append(leaf, 0x41, 0x01)
	f := wasmasm.Cat(
		[]byte{0x00, 0x20, 0x00, 0x45, 0x04, 0x7f}, // no locals; if (n == 0) (result i32)
		leaf,
		[]byte{0x05}, // else
		[]byte{0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, 0x01}, // f(n-1)
		[]byte{0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, 0x01}, // f(n-1)
		[]byte{0x6a, 0x0b, 0x0b},                         // i32.add; end; end
	)
	run := []byte{0x00, 0x41, 62, 0x10, 0x01, 0x0b} // f(62)
	return wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec([]byte{0x60, 0x00, 0x01, 0x7f}, []byte{0x60, 0x01, 0x7f, 0x01, 0x7f})),
		wasmasm.Section(3, wasmasm.Vec([]byte{0x00}, []byte{0x01})),
		wasmasm.Section(5, []byte{0x01, 0x00, 0x01}),
		wasmasm.Section(7, wasmasm.Vec(append(wasmasm.Name("run"), 0x00, 0x00))),
		wasmasm.Section(10, wasmasm.Vec(
			wasmasm.Cat(wasmasm.Uleb(uint64(len(run))), run),
			wasmasm.Cat(wasmasm.Uleb(uint64(len(f))), f))),
	)
}

// StartSpinModule is a command whose start function (the start section,
// run by instantiation itself) is "loop br 0 end".
func StartSpinModule() []byte {
	body := []byte{0x00, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b}
	return wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec([]byte{0x60, 0x00, 0x00})),
		wasmasm.Section(3, wasmasm.Vec([]byte{0x00}, []byte{0x00})),
		wasmasm.Section(5, []byte{0x01, 0x00, 0x01}),
		wasmasm.Section(7, wasmasm.Vec(append(wasmasm.Name("_start"), 0x00, 0x01))),
		wasmasm.Section(8, []byte{0x00}),
		wasmasm.Section(10, wasmasm.Vec(
			wasmasm.Cat(wasmasm.Uleb(uint64(len(body))), body),
			[]byte{0x02, 0x00, 0x0b})), // _start: nothing
	)
}

// runaways are the guests testGCWhileSpinning and testRunawayShapes run.
func runaways() []struct {
	name, entry string
	wasm        []byte
} {
	return []struct {
		name, entry string
		wasm        []byte
	}{
		{"go-for", "", Guest("spin")},
		{"loop", "run", SpinModule()},
		{"recursion", "run", FanoutModule(0)},
		{"straight-line", "run", FanoutModule(20_000)},
	}
}

// testGCWhileSpinning is the deadlock reproduction: while a guest spins
// without calling the host, the test calls runtime.GC() again and again. A
// garbage collection stops the world, which waits for every goroutine to
// reach a safe point; compiled guest code has none, so an engine whose
// guests never leave it (a rewrite that only tests a flag, say) hangs the
// whole process there, the stop at the deadline included. Every
// collection must finish well before the deadline, and the run must still
// end at it.
func (s *suite) testGCWhileSpinning(t *testing.T) {
	e, _ := s.engine(t, sandbox.Config{})
	for _, g := range runaways() {
		t.Run(g.name, func(t *testing.T) {
			m := compileBytes(t, e, g.name, g.wasm)
			// A collection that waits for the guest returns only once the
			// guest has left its code, at the deadline: none would end while
			// the run goes on. Collections that do are counted, not timed
			// (one took 1.5 s at load 12 without waiting for anything).
			const timeout = 3 * time.Second
			done := make(chan error, 1)
			var finished atomic.Bool
			start := time.Now()
			go func() {
				err := m.Run(context.Background(), sandbox.RunConfig{Name: g.name, Entry: g.entry, Timeout: timeout})
				finished.Store(true)
				done <- err
			}()
			var (
				gcs, during int
				slowest     time.Duration
				err         error
			)
		collect:
			for {
				select {
				case err = <-done:
					break collect
				default:
				}
				t0 := time.Now()
				runtime.GC()
				gcs++
				if !finished.Load() {
					during++
				}
				slowest = max(slowest, time.Since(t0))
			}
			took := time.Since(start)
			t.Logf("%d collections, %d of them ended while the guest ran, the slowest %v; stopped after %v", gcs, during, slowest, took)
			if !errors.Is(err, sandbox.ErrTimeout) {
				t.Fatalf("Run = %v, want ErrTimeout", err)
			}
			if took > timeout+10*time.Second {
				t.Errorf("stopped after %v, %v past the deadline", took, took-timeout)
			}
			if during < 2 {
				t.Errorf("%d collections ended while the guest ran (slowest %v): they waited for the guest", during, slowest)
			}
		})
	}
}

// testRunawayShapes stops each runaway at its deadline and on
// cancellation, and a guest spinning in its start function (run by
// instantiation, before any export is called).
func (s *suite) testRunawayShapes(t *testing.T) {
	e, _ := s.engine(t, sandbox.Config{})
	guests := append(runaways(), struct {
		name, entry string
		wasm        []byte
	}{"start-function", "", StartSpinModule()})
	for _, g := range guests {
		t.Run(g.name, func(t *testing.T) {
			m := compileBytes(t, e, g.name, g.wasm)
			start := time.Now()
			err := m.Run(context.Background(), sandbox.RunConfig{Name: g.name, Entry: g.entry, Timeout: 200 * time.Millisecond})
			if !errors.Is(err, sandbox.ErrTimeout) {
				t.Fatalf("Run = %v, want ErrTimeout", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("stopping took %v", d)
			}
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			if err := m.Run(ctx, sandbox.RunConfig{Name: g.name, Entry: g.entry}); !errors.Is(err, sandbox.ErrCanceled) {
				t.Fatalf("Run canceled = %v, want ErrCanceled", err)
			}
		})
	}
}
