package wazero

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
		return newTestEngine(t, cfg)
	}, sandboxtest.CompileBombs(), sandboxtest.LocalsBomb())
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
	e := newTestEngine(t, sandbox.Config{CacheDir: t.TempDir(), NoSnapshots: true})
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
	e, err := newEngine(ctx, sandbox.Config{}, options{compileInProcess: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	bombs := append(sandboxtest.CompileBombs(), sandboxtest.Bomb{Name: "locals", Wasm: sandboxtest.LocalsBomb()})
	for _, b := range bombs {
		if b.Name != "locals" && os.Getenv("MANDATE_MEASURE") != "all" {
			continue // minutes each
		}
		os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
		before := vmHWM(t)
		cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		start := time.Now()
		m, err := e.Compile(cctx, b.Wasm)
		cancel()
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

// wazeroFiles are the files of wazero's own cache under dir.
func wazeroFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "wazero-*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestCompiledInChildIsCacheHit: the parent loads what the child compiled
// (its runtime is configured as the parent's: no second file appears), the
// marker spares the next engine a child, and a marker whose cache file is
// gone does not.
func TestCompiledInChildIsCacheHit(t *testing.T) {
	ctx := context.Background()
	wasm := sandboxtest.Guest("hello")
	for name, opt := range map[string]options{"rewrite": {}, "closeondone": {preempt: preemptCloseOnDone}} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			compile := func() (children uint64) {
				t.Helper()
				e, err := newEngine(ctx, sandbox.Config{CacheDir: dir}, opt)
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close(ctx)
				before := isolate.Started()
				m, err := e.Compile(ctx, wasm)
				if err != nil {
					t.Fatal(err)
				}
				m.Close(ctx)
				return isolate.Started() - before
			}
			if n := compile(); n != 1 {
				t.Fatalf("first compile started %d children, want 1", n)
			}
			files := wazeroFiles(t, dir)
			if len(files) != 1 {
				t.Fatalf("wazero's cache holds %v, want one file (the child's)", files)
			}
			if n := compile(); n != 0 {
				t.Fatalf("a compile from the cache started %d children", n)
			}
			if err := os.Remove(files[0]); err != nil {
				t.Fatal(err)
			}
			if n := compile(); n != 1 {
				t.Fatalf("a compile whose cache file is gone started %d children, want 1", n)
			}
		})
	}
}

// TestPrivateCache: without Config.CacheDir the engine compiles through a
// temporary cache of its own, gone after Close.
func TestPrivateCache(t *testing.T) {
	ctx := context.Background()
	e, err := New(ctx, sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	dir := e.private
	if dir == "" || e.cacheDir != dir {
		t.Fatalf("private cache %q, cache dir %q", dir, e.cacheDir)
	}
	before := isolate.Started()
	m, err := e.Compile(ctx, sandboxtest.Guest("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if isolate.Started() == before {
		t.Error("compiled with no child")
	}
	m.Close(ctx)
	e.Close(ctx)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("private cache %s still there after Close (%v)", dir, err)
	}
}

// BenchmarkCompileIsolated: what compiling out of process costs (see
// BENCHMARKS.md).
func BenchmarkCompileIsolated(b *testing.B) {
	sandboxtest.BenchCompileIsolated(b, func(cfg sandbox.Config, inProcess bool) (sandbox.Engine, error) {
		return newEngine(context.Background(), cfg, options{noSnapshot: cfg.NoSnapshots, compileInProcess: inProcess})
	})
}
