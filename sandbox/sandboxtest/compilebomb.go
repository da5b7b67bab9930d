package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/wasmasm"
	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/internal/isolate"
)

// Compile bombs: small modules that take a compiler minutes or gigabytes
// (issue 24). Each is a module with one page of memory whose functions
// take and return nothing, the first exported as "run".

// bombModule assembles n functions of type () -> () with the given bodies
// (locals declarations included, without the final end): bodies[i] when
// there are n of them, else bodies[0] for every function.
func bombModule(n int, bodies ...[]byte) []byte {
	funcs := bytes.Repeat([]byte{0x00}, n) // every function: type 0
	var code bytes.Buffer
	code.Write(wasmasm.Uleb(uint64(n)))
	for i := range n {
		body := bodies[0]
		if len(bodies) == n {
			body = bodies[i]
		}
		code.Write(wasmasm.Uleb(uint64(len(body) + 1)))
		code.Write(body)
		code.WriteByte(0x0b)
	}
	return wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec([]byte{0x60, 0x00, 0x00})), // type 0: () -> ()
		wasmasm.Section(3, wasmasm.Uleb(uint64(n)), funcs),
		wasmasm.Section(5, []byte{0x01, 0x00, 0x01}),                             // memory 0: min 1 page
		wasmasm.Section(7, wasmasm.Vec(append(wasmasm.Name("run"), 0x00, 0x00))), // export "run" = func 0
		wasmasm.Section(10, code.Bytes()),
	)
}

// NestedLoopsModule is one function of n nested loops.
func NestedLoopsModule(n int) []byte {
	body := []byte{0x00} // no locals
	body = append(body, bytes.Repeat([]byte{0x03, 0x40}, n)...)
	body = append(body, bytes.Repeat([]byte{0x0b}, n)...)
	return bombModule(1, body)
}

// BrTableModule is one function with a br_table of n targets.
func BrTableModule(n int) []byte {
	body := []byte{0x00, 0x02, 0x40, 0x41, 0x00, 0x0e} // no locals; block; i32.const 0; br_table
	body = append(body, wasmasm.Uleb(uint64(n))...)
	body = append(body, bytes.Repeat([]byte{0x00}, n+1)...) // n targets and the default: the block
	body = append(body, 0x0b)                               // end of the block
	return bombModule(1, body)
}

// ManyFunctionsModule is n empty functions.
func ManyFunctionsModule(n int) []byte {
	return bombModule(n, []byte{0x00})
}

// ManyLocalsModule is n functions of locals i64 locals each, every one
// read once.
func ManyLocalsModule(n, locals int) []byte {
	body := wasmasm.Cat(wasmasm.Vec(wasmasm.Cat(wasmasm.Uleb(uint64(locals)), []byte{0x7e}))) // locals × i64
	return bombModule(n, body)
}

// Bomb is a module named for what it does to a compiler.
type Bomb struct {
	Name string
	Wasm []byte
}

// CompileBombs are modules that hold wazero's compiler for minutes. Not
// every one is a bomb for every compiler: wasmtime compiles the br_table
// of 10^6 targets in 1.6-1.7 s (linear in its size; measured), so its
// conformance test leaves that one out of RunCompileLimits' timeBombs.
func CompileBombs() []Bomb {
	return []Bomb{
		{"nested-loops-50000", NestedLoopsModule(50_000)},
		{"br_table-1000000", BrTableModule(1_000_000)},
		{"functions-1000000", ManyFunctionsModule(1_000_000)},
	}
}

// LocalsBomb is 4,000 functions of 50,000 locals (32 KB): wazero takes
// about 1.5 GB to compile it (742 MiB for half of it, measured), wasmtime
// next to nothing.
func LocalsBomb() []byte { return ManyLocalsModule(4_000, 50_000) }

// StackBomb is a function of 1,500,000 values live at once (4.5 MB):
// wasmtime takes about 1.1 GB to compile it (731 MiB for 1,000,000,
// measured).
func StackBomb() []byte { return StackModule(1_500_000) }

// noStaticLimits are static limits no bomb reaches, so the bombs reach
// the compiler.
var noStaticLimits = sandbox.StaticLimits{
	Functions:      1 << 30,
	Locals:         1 << 30,
	Nesting:        1 << 30,
	BrTableTargets: 1 << 30,
	BodySize:       1 << 30,
}

// hangBound is how long a compile may take before a test calls it hung.
const hangBound = 60 * time.Second

// WithoutBombs is bombs without those named.
func WithoutBombs(bombs []Bomb, names ...string) []Bomb {
	var out []Bomb
	for _, b := range bombs {
		if !slices.Contains(names, b.Name) {
			out = append(out, b)
		}
	}
	return out
}

// RunCompileLimits checks that an engine compiles out of process, within
// CompileConfig's time and memory (sandbox/internal/isolate). newEngine is
// given a fresh cache directory for every engine that must compile.
// timeBombs are modules that engine takes well over ten seconds to
// compile (from CompileBombs: each must outlast the 2 s timeout on the
// fastest machine CI runs on); memoryBomb is one it takes well over a
// gigabyte to compile (LocalsBomb, StackBomb).
func RunCompileLimits(t *testing.T, newEngine NewEngine, timeBombs []Bomb, memoryBomb []byte) {
	if !isolate.Supported {
		t.Skip("modules are compiled in process on this system")
	}
	t.Run("Timeout", func(t *testing.T) {
		if len(timeBombs) == 0 {
			t.Fatal("no time bombs")
		}
		for _, b := range timeBombs {
			t.Run(b.Name, func(t *testing.T) {
				e := newEngine(t, sandbox.Config{CacheDir: t.TempDir()})
				elapsed, err := compileWithin(t, e, b.Wasm, sandbox.CompileConfig{Limits: noStaticLimits, Timeout: 2 * time.Second})
				if !errors.Is(err, sandbox.ErrTimeout) {
					t.Fatalf("CompileWith = %v, want ErrTimeout", err)
				}
				t.Logf("%d bytes: %v after %v", len(b.Wasm), err, elapsed.Round(time.Millisecond))
			})
		}
	})
	t.Run("Memory", func(t *testing.T) {
		e := newEngine(t, sandbox.Config{CacheDir: t.TempDir()})
		wasm := memoryBomb
		resetPeakRSS(t)
		before := peakRSS(t)
		elapsed, err := compileWithin(t, e, wasm, sandbox.CompileConfig{Limits: noStaticLimits, MemoryLimit: 256 << 20, Timeout: hangBound})
		if !errors.Is(err, sandbox.ErrMemoryLimit) {
			t.Fatalf("CompileWith = %v, want ErrMemoryLimit", err)
		}
		// The peak is read, not sampled: it can read lower than before
		// when the kernel folded the counters in after the reset.
		var grew uint64
		if after := peakRSS(t); after > before {
			grew = after - before
		}
		t.Logf("%d bytes: %v after %v; this process's peak RSS grew by %d MiB", len(wasm), err, elapsed.Round(time.Millisecond), grew>>20)
		// Compiled in this process, the bomb takes over a gigabyte.
		if grew > ParentGrowthBound {
			t.Errorf("this process's peak RSS grew by %d MiB compiling out of process, want at most %d MiB", grew>>20, ParentGrowthBound>>20)
		}
	})
	t.Run("Canceled", func(t *testing.T) {
		e := newEngine(t, sandbox.Config{CacheDir: t.TempDir()})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		pids := make(chan int, 1)
		defer isolate.OnStart(func(_ string, pid int) {
			select {
			case pids <- pid:
			default:
			}
		})()
		errc := make(chan error, 1)
		go func() {
			_, err := e.CompileWith(ctx, NestedLoopsModule(50_000), sandbox.CompileConfig{Limits: noStaticLimits})
			errc <- err
		}()
		var pid int
		select {
		case pid = <-pids:
		case err := <-errc:
			t.Fatalf("CompileWith returned %v before a child started", err)
		case <-time.After(hangBound):
			t.Fatal("no child started")
		}
		time.Sleep(200 * time.Millisecond)
		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, sandbox.ErrCanceled) {
				t.Fatalf("CompileWith = %v, want ErrCanceled", err)
			}
		case <-time.After(hangBound):
			t.Fatal("CompileWith still running after its ctx was canceled")
		}
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); !os.IsNotExist(err) {
			t.Fatalf("the compile's child %d is still there (%v)", pid, err)
		}
	})
	t.Run("GuestCompilesAndRuns", func(t *testing.T) {
		dir := t.TempDir()
		e := newEngine(t, sandbox.Config{CacheDir: dir})
		started := isolate.Started()
		m, err := e.CompileWith(context.Background(), Guest("hello"), sandbox.CompileConfig{Timeout: hangBound, MemoryLimit: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(context.Background())
		if isolate.Started() == started {
			t.Fatal("compiled with no child")
		}
		runHello(t, m)

		// A new engine on the same cache: a hit, and no child.
		e2 := newEngine(t, sandbox.Config{CacheDir: dir})
		started = isolate.Started()
		m2, err := e2.CompileWith(context.Background(), Guest("hello"), sandbox.CompileConfig{Timeout: hangBound, MemoryLimit: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer m2.Close(context.Background())
		if n := isolate.Started() - started; n != 0 {
			t.Fatalf("a compile from the cache started %d children", n)
		}
		runHello(t, m2)
	})
}

// ParentGrowthBound is how much the test process's peak RSS may grow while
// an engine compiles the locals bomb out of process.
const ParentGrowthBound = 128 << 20

// compileWithin compiles wasm with cfg, failing the test if it takes
// hangBound, and returns how long it took and its error. A module it
// compiled is closed.
func compileWithin(t *testing.T, e sandbox.Engine, wasm []byte, cfg sandbox.CompileConfig) (time.Duration, error) {
	t.Helper()
	type result struct {
		m   sandbox.Module
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		m, err := e.CompileWith(context.Background(), wasm, cfg)
		done <- result{m, err}
	}()
	select {
	case r := <-done:
		if r.m != nil {
			r.m.Close(context.Background())
		}
		return time.Since(start), r.err
	case <-time.After(hangBound):
		t.Fatalf("CompileWith still running after %v", hangBound)
		return 0, nil
	}
}

// resetPeakRSS resets this process's VmHWM (Linux 4.0 and later).
func resetPeakRSS(t testing.TB) {
	t.Helper()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Logf("resetting the peak RSS: %v", err)
	}
}

// peakRSS is this process's VmHWM in bytes.
func peakRSS(t testing.TB) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// StackModule is one function that pushes n constants and adds them up: n
// values live at once, a long straight-line body.
func StackModule(n int) []byte {
	body := []byte{0x00} // no locals
	body = append(body, bytes.Repeat([]byte{0x41, 0x01}, n)...)
	body = append(body, bytes.Repeat([]byte{0x6a}, n-1)...)
	body = append(body, 0x1a) // drop
	return bombModule(1, body)
}
