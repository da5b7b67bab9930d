//go:build wasmtime

package wasmtime

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/mandatevm/mandate/internal/wasmasm"
	"github.com/mandatevm/mandate/sandbox"
)

// viewModule is a reactor with one page of memory (exported as "memory"
// when exported is set) and a start function calling env.size; its entry
// "run" calls env.size, grows the memory by one page, and calls env.size
// again.
func viewModule(exported bool) []byte {
	callSize := []byte{0x41, 0x00, 0x10, 0x00, 0x1a} // i32.const 0; call env.size; drop
	fn := func(code ...[]byte) []byte {
		body := wasmasm.Cat([]byte{0x00}, wasmasm.Cat(code...), []byte{0x0b})
		return wasmasm.Cat(wasmasm.Uleb(uint64(len(body))), body)
	}
	exports := [][]byte{wasmasm.Cat(wasmasm.Name("run"), []byte{0x00, 0x02})}
	if exported {
		exports = append(exports, wasmasm.Cat(wasmasm.Name("memory"), []byte{0x02, 0x00}))
	}
	return wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec(
			[]byte{0x60, 0x01, 0x7f, 0x01, 0x7f}, // 0: (i32) -> i32
			[]byte{0x60, 0x00, 0x00},             // 1: () -> ()
		)),
		wasmasm.Section(2, wasmasm.Vec(wasmasm.Cat(wasmasm.Name("env"), wasmasm.Name("size"), []byte{0x00, 0x00}))),
		wasmasm.Section(3, wasmasm.Vec([]byte{0x01}, []byte{0x01})), // func 1 (start), func 2 (run)
		wasmasm.Section(5, wasmasm.Vec([]byte{0x00, 0x01})),         // memory 0: min 1 page
		wasmasm.Section(7, wasmasm.Vec(exports...)),
		wasmasm.Section(8, wasmasm.Uleb(1)), // start: func 1
		wasmasm.Section(10, wasmasm.Vec(
			fn(callSize),
			fn(callSize, []byte{0x41, 0x01, 0x40, 0x00, 0x1a}, callSize), // i32.const 1; memory.grow 0; drop
		)),
	)
}

// TestHostCallMemoryView: a host function sees the caller's memory as it
// is at each call: during instantiation (a start function runs before the
// run has looked the memory up), and after a memory.grow, which may move
// it; without an exported memory it sees an empty one.
func TestHostCallMemoryView(t *testing.T) {
	for _, c := range []struct {
		name     string
		exported bool
		want     []uint32
	}{
		{"exported", true, []uint32{1 << 16, 1 << 16, 2 << 16}},
		{"unexported", false, []uint32{0, 0, 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			e := newTestEngine(t, sandbox.Config{}, options{})
			var (
				mu    sync.Mutex
				sizes []uint32
			)
			if err := e.Host("env", []sandbox.HostFunc{{Name: "size", Params: sandbox.Values(1), Fn: func(_ context.Context, mem sandbox.Memory, stack []uint64) {
				mu.Lock()
				sizes = append(sizes, mem.Size())
				mu.Unlock()
				stack[0] = 0
			}}}); err != nil {
				t.Fatal(err)
			}
			m, err := e.Compile(ctx, viewModule(c.exported))
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Run(ctx, sandbox.RunConfig{Entry: "run"}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(sizes, c.want) {
				t.Errorf("sizes seen by the host = %v, want %v", sizes, c.want)
			}
		})
	}
}

// TestHostCallAllocs: a host call that reads guest memory and returns an
// errno allocates nothing (wasmtime-go's Linker.FuncNew crossing allocates
// at least 2 per call, logged for comparison).
func TestHostCallAllocs(t *testing.T) {
	ctx := context.Background()
	e := newTestEngine(t, sandbox.Config{}, options{})
	if err := e.Host("env", []sandbox.HostFunc{{Name: "f", Params: sandbox.Values(hostCallParams), Fn: func(_ context.Context, mem sandbox.Memory, stack []uint64) {
		b, _ := mem.Read(0, 4)
		stack[0] = uint64(len(b) + int(mem.Size()>>16)) // 5, an errno's size
	}}}); err != nil {
		t.Fatal(err)
	}
	engine := func(n int32) float64 {
		m, err := e.Compile(ctx, hostCallModule(n))
		if err != nil {
			t.Fatal(err)
		}
		return testing.AllocsPerRun(3, func() {
			if err := m.Run(ctx, sandbox.RunConfig{Entry: "run"}); err != nil {
				t.Fatal(err)
			}
		})
	}
	const calls = 10_000
	got := (engine(calls) - engine(0)) / calls
	bare := testing.AllocsPerRun(3, bareHostCalls(t, calls)) / calls
	if got > 0.01 {
		t.Errorf("allocations per host call = %.2f, want 0", got)
	}
	t.Logf("allocations per host call: %.2f (bare wasmtime-go: %.2f)", got, bare)
}
