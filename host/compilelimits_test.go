package host_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/internal/wasmasm"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/manifest"
	"github.com/mandatevm/mandate/runstore"
	"github.com/mandatevm/mandate/sandbox"
)

// limitsTask writes module and a manifest running it with limits (HCL
// attributes), and parses it.
func limitsTask(t *testing.T, module []byte, limits string) *manifest.Manifest {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.wasm"), module, 0o644); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf("task \"t\" {\n  module    = \"m.wasm\"\n  principal = \"alice\"\n  limits {\n%s\n  }\n}\n", limits)
	m, err := manifest.Parse([]byte(src), filepath.Join(dir, "t.hcl"), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestStaticLimitRefusesTheRun: a module past a static limit, the
// default's or the manifest's, refuses the run before its task starts,
// with an error naming the limit, recorded.
func TestStaticLimitRefusesTheRun(t *testing.T) {
	h, err := host.Open(context.Background(), host.Options{StateDir: t.TempDir(), CacheDir: testCache()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for _, tt := range []struct {
		name   string
		module []byte
		limits string
		want   string
	}{
		{"a bomb, default limits", wasmasm.NestedLoops(50_000), "", "function 0 nests blocks 50000 deep; the limit (limits { nesting }) is 2500"},
		{"the manifest's limit", leafModule(), "    function_size = 1", "function 0 has a body of 2 bytes; the limit (limits { function_size }) is 1 bytes"},
	} {
		start := time.Now()
		_, err := h.Start(context.Background(), host.RunSpec{Manifest: limitsTask(t, tt.module, tt.limits)})
		var re *host.RefusedError
		if !errors.As(err, &re) || !errors.Is(err, sandbox.ErrStaticLimit) || !strings.Contains(err.Error(), tt.want) {
			t.Fatalf("%s: %v, want a RefusedError: %s", tt.name, err, tt.want)
		}
		t.Logf("%s: refused after %v (by the static check: ErrStaticLimit)", tt.name, time.Since(start).Round(time.Millisecond))
		got, err := h.Store().Get(context.Background(), re.Record.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Run.State != runstore.StateRefused || got.Run.Exit != host.ExitUsage || !strings.Contains(got.Run.Error, tt.want) {
			t.Errorf("%s: recorded %+v", tt.name, got.Run)
		}
		if len(got.Graph.Tasks) != 0 {
			t.Errorf("%s: the task started: %+v", tt.name, got.Graph.Tasks)
		}
	}
	// Within the manifest's limits, the module runs.
	if out := runOnce(t, h, limitsTask(t, leafModule(), "    function_size = 2\n    functions = 1"), ""); out.Exit != host.ExitOK {
		t.Fatalf("within the limits: exit %d, %v", out.Exit, out.Err)
	}
}

// limitEngine is the engine under test, whose compiles end with err after
// recording the CompileConfig they were given.
type limitEngine struct {
	sandbox.Engine
	err error

	mu  sync.Mutex
	got []sandbox.CompileConfig
}

func (e *limitEngine) CompileWith(ctx context.Context, wasm []byte, cfg sandbox.CompileConfig) (sandbox.Module, error) {
	e.mu.Lock()
	e.got = append(e.got, cfg)
	e.mu.Unlock()
	return nil, fmt.Errorf("compile: %w", e.err)
}

// TestCompileOutOfLimitsIsTheTasks: a compile the engine ends at the
// task's timeout or compile memory ends the run as the task's: timed out
// or out of memory, ExitLimit; and the engine is given the task's limits.
func TestCompileOutOfLimitsIsTheTasks(t *testing.T) {
	for _, tt := range []struct {
		err   error
		state kernel.TaskState
	}{
		{sandbox.ErrTimeout, kernel.TaskTimedOut},
		{sandbox.ErrMemoryLimit, kernel.TaskOutOfMemory},
	} {
		name := "limit-" + string(tt.state)
		eng := &limitEngine{err: tt.err}
		host.AddEngineForTest(name, func(ctx context.Context, _ string) (sandbox.Engine, error) {
			inner, err := host.NewEngine(ctx, testengine.Name(), testengine.CacheDir())
			eng.Engine = inner
			return eng, err
		})
		h, err := host.Open(context.Background(), host.Options{StateDir: t.TempDir(), CacheDir: testCache(), Engine: name})
		if err != nil {
			t.Fatal(err)
		}
		m := limitsTask(t, leafModule(), "    timeout = \"7s\"\n    compile_memory = \"300MiB\"\n    locals = 40")
		_, err = h.Start(context.Background(), host.RunSpec{Manifest: m})
		var re *host.RefusedError
		if !errors.As(err, &re) || !errors.Is(err, tt.err) {
			t.Fatalf("%s: %v, want a RefusedError wrapping %v", tt.state, err, tt.err)
		}
		got, err := h.Store().Get(context.Background(), re.Record.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Run.State != string(tt.state) || got.Run.Exit != host.ExitLimit {
			t.Errorf("%s: recorded state %q exit %d, want %q %d", tt.state, got.Run.State, got.Run.Exit, tt.state, host.ExitLimit)
		}
		want := sandbox.CompileConfig{Limits: sandbox.StaticLimits{Locals: 40}, Timeout: 7 * time.Second, MemoryLimit: 300 << 20}
		eng.mu.Lock()
		if len(eng.got) != 1 || eng.got[0] != want {
			t.Errorf("%s: the engine was given %+v, want [%+v]", tt.state, eng.got, want)
		}
		eng.mu.Unlock()
		h.Close()
	}
}
