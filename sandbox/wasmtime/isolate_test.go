//go:build wasmtime

package wasmtime

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/internal/isolate"
	"github.com/mandatevm/mandate/sandbox/sandboxtest"
)

// TestCompileLimits: compile bombs end at their timeout or memory limit,
// in a child process.
func TestCompileLimits(t *testing.T) {
	sandboxtest.RunCompileLimits(t, func(t testing.TB, cfg sandbox.Config) sandbox.Engine {
		return newTestEngine(t, cfg, options{})
	}, sandboxtest.WithoutBombs(sandboxtest.CompileBombs(), "br_table-1000000"), sandboxtest.StackBomb())
}

// largestGuest is the repository's largest Go guest.
func largestGuest(t testing.TB) []byte {
	t.Helper()
	wasm, err := sandboxtest.LargestGuest()
	if err != nil {
		t.Fatal(err)
	}
	return wasm
}

// TestMeasureHeadroom reports what a child maps compiling the largest Go
// guest beyond what it mapped when it started: isolate.Headroom must hold
// it. MANDATE_MEASURE=1 runs it.
func TestMeasureHeadroom(t *testing.T) {
	if os.Getenv("MANDATE_MEASURE") == "" {
		t.Skip("MANDATE_MEASURE not set")
	}
	t.Setenv(isolate.MeasureVar, "1")
	var res isolate.Result
	compileReport = func(r isolate.Result, err error) { res = r }
	defer func() { compileReport = nil }()
	wasm := largestGuest(t)
	e := newTestEngine(t, sandbox.Config{CacheDir: t.TempDir(), NoSnapshots: true}, options{})
	if err := sandboxtest.StubHosts(e, wasm); err != nil {
		t.Fatal(err)
	}
	m, err := e.CompileWith(context.Background(), wasm, sandbox.CompileConfig{})
	if err != nil {
		t.Fatal(err)
	}
	m.Close(context.Background())
	var start, peak, hwm uint64
	if _, err := fmt.Sscanf(res.Stderr, "isolate: VmSize at start %d, VmPeak %d, VmHWM %d", &start, &peak, &hwm); err != nil {
		t.Fatalf("child's report %q: %v", res.Stderr, err)
	}
	t.Logf("largest guest (%d bytes): child VmSize at start %d MiB, VmPeak %d MiB (+%d MiB), peak RSS %d MiB, %v",
		len(wasm), start>>20, peak>>20, (peak-start)>>20, hwm>>20, res.Wall.Round(time.Millisecond))
}

// TestMeasureInProcess reports what the bombs cost compiled in this
// process: the bounds of RunCompileLimits must fail for it.
// MANDATE_MEASURE=1 runs it.
func TestMeasureInProcess(t *testing.T) {
	if os.Getenv("MANDATE_MEASURE") == "" {
		t.Skip("MANDATE_MEASURE not set")
	}
	ctx := context.Background()
	e := newTestEngine(t, sandbox.Config{CacheDir: t.TempDir()}, options{compileInProcess: true})
	bombs := append(sandboxtest.CompileBombs(),
		sandboxtest.Bomb{Name: "locals", Wasm: sandboxtest.LocalsBomb()},
		sandboxtest.Bomb{Name: "stack", Wasm: sandboxtest.StackModule(1_000_000)})
	for _, b := range bombs {
		if b.Name != os.Getenv("MANDATE_MEASURE") && os.Getenv("MANDATE_MEASURE") != "all" {
			continue // minutes each
		}
		os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
		before := vmHWM(t)
		start := time.Now()
		m, err := e.Compile(ctx, b.Wasm)
		if err == nil {
			m.Close(ctx)
		}
		t.Logf("%s (%d bytes) in process: %v, peak RSS +%d MiB, err %v", b.Name, len(b.Wasm), time.Since(start).Round(time.Millisecond), (vmHWM(t)-before)>>20, err)
	}
}

func vmHWM(t testing.TB) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkCompileIsolated: what compiling out of process costs (see
// BENCHMARKS.md).
func BenchmarkCompileIsolated(b *testing.B) {
	sandboxtest.BenchCompileIsolated(b, func(cfg sandbox.Config, inProcess bool) (sandbox.Engine, error) {
		return newEngine(context.Background(), cfg, options{noSnapshot: cfg.NoSnapshots, compileInProcess: inProcess})
	})
}
