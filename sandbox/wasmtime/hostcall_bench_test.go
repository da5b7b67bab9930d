//go:build wasmtime

package wasmtime

import (
	"context"
	"testing"
	"time"

	wt "github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/mandatevm/mandate/internal/cputime"
	"github.com/mandatevm/mandate/internal/wasmasm"
	"github.com/mandatevm/mandate/sandbox"
)

// hostCallParams is how many i32s the benchmarked host function takes: as
// many as the kernel's cap_call.
const hostCallParams = 6

// hostCallModule is a reactor with one page of memory (exported as
// "memory") whose entry "run" calls the imported env.f, of type
// (i32 x hostCallParams) -> i32, n times with zeros and drops the results.
func hostCallModule(n int32) []byte {
	params := []byte{hostCallParams}
	for range hostCallParams {
		params = append(params, 0x7f)
	}
	fType := wasmasm.Cat([]byte{0x60}, params, []byte{0x01, 0x7f})
	var call []byte
	for range hostCallParams {
		call = append(call, 0x41, 0x00) // i32.const 0
	}
	call = append(call, 0x10, 0x00, 0x1a) // call 0; drop
	code := wasmasm.Cat(
		[]byte{0x41}, wasmasm.Sleb(int64(n)), []byte{0x21, 0x00}, // i32.const n; local.set 0
		[]byte{0x02, 0x40, 0x03, 0x40},       // block; loop
		[]byte{0x20, 0x00, 0x45, 0x0d, 0x01}, // local.get 0; i32.eqz; br_if 1
		call,
		[]byte{0x20, 0x00, 0x41, 0x01, 0x6b, 0x21, 0x00}, // local.get 0; i32.const 1; i32.sub; local.set 0
		[]byte{0x0c, 0x00, 0x0b, 0x0b},                   // br 0; end; end
	)
	body := wasmasm.Cat([]byte{0x01, 0x01, 0x7f}, code, []byte{0x0b}) // one i32 local
	return wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec(fType, []byte{0x60, 0x00, 0x00})),                                         // 0: f, 1: run
		wasmasm.Section(2, wasmasm.Vec(wasmasm.Cat(wasmasm.Name("env"), wasmasm.Name("f"), []byte{0x00, 0x00}))), // import env.f
		wasmasm.Section(3, wasmasm.Vec([]byte{0x01})),                                                            // func 1: type 1
		wasmasm.Section(5, wasmasm.Vec([]byte{0x00, 0x01})),                                                      // memory 0: min 1 page
		wasmasm.Section(7, wasmasm.Vec(
			wasmasm.Cat(wasmasm.Name("run"), []byte{0x00, 0x01}),
			wasmasm.Cat(wasmasm.Name("memory"), []byte{0x02, 0x00}))),
		wasmasm.Section(10, wasmasm.Vec(wasmasm.Cat(wasmasm.Uleb(uint64(len(body))), body))),
	)
}

// BenchmarkHostCall measures one call from compiled wasm to a host function
// that does nothing, with the arguments of cap_call: "bare" defines it with
// wasmtime-go alone (Linker.FuncNew, wasmtime-go's own crossing), "engine"
// through Engine.Host, as the kernel's host calls are (an unchecked
// function, hostcall.go: the run found by its store, the guest memory
// view, panic recovery). One op is one call; the guest loops b.N times in
// one instance, whose start is outside the timer only in "bare" (it is a
// few microseconds in b.N calls: run it with -benchtime 1000000x).
func BenchmarkHostCall(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		run := bareHostCalls(b, int32(b.N))
		b.ReportAllocs()
		b.ResetTimer()
		cpu := cputime.Process()
		run()
		reportCPUPerOp(b, cpu)
	})
	b.Run("engine", func(b *testing.B) {
		ctx := context.Background()
		e := benchEngine(b, sandbox.Config{}, options{})
		if err := e.Host("env", []sandbox.HostFunc{{Name: "f", Params: sandbox.Values(hostCallParams), Fn: func(_ context.Context, _ sandbox.Memory, stack []uint64) {
			stack[0] = 0
		}}}); err != nil {
			b.Fatal(err)
		}
		m, err := e.Compile(ctx, hostCallModule(int32(b.N)))
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		cpu := cputime.Process()
		if err := m.Run(ctx, sandbox.RunConfig{Entry: "run"}); err != nil {
			b.Fatal(err)
		}
		reportCPUPerOp(b, cpu)
	})
}

// bareHostCalls instantiates hostCallModule(n) with wasmtime-go alone, its
// env.f an empty Linker.FuncNew function, and returns a function calling
// its entry (n host calls). Everything is closed when tb ends.
func bareHostCalls(tb testing.TB, n int32) (run func()) {
	eng := wt.NewEngine()
	linker := wt.NewLinker(eng)
	ty := funcSig{params: "iiiiii", results: "i"}.funcType()
	res := []wt.Val{wt.ValI32(0)}
	if err := linker.FuncNew("env", "f", ty, func(*wt.Caller, []wt.Val) ([]wt.Val, *wt.Trap) {
		return res, nil
	}); err != nil {
		tb.Fatal(err)
	}
	mod, err := wt.NewModule(eng, hostCallModule(n))
	if err != nil {
		tb.Fatal(err)
	}
	store := wt.NewStore(eng)
	tb.Cleanup(func() {
		store.Close()
		mod.Close()
		linker.Close()
		eng.Close()
	})
	inst, err := linker.Instantiate(store, mod)
	if err != nil {
		tb.Fatal(err)
	}
	entry := inst.GetFunc(store, "run")
	return func() {
		if _, err := entry.Call(store); err != nil {
			tb.Fatal(err)
		}
	}
}

// reportCPUPerOp reports the process CPU time per op since start.
func reportCPUPerOp(b *testing.B, start time.Duration) {
	b.StopTimer()
	if start != 0 && b.N > 0 {
		b.ReportMetric(float64(cputime.Process()-start)/float64(b.N), "cpu-ns/op")
	}
}
