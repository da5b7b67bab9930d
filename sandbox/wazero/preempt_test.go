package wazero

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/wasmasm"
	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/internal/wasmbin"
	"github.com/mandatevm/mandate/sandbox/sandboxtest"
)

// TestPreemptReserved: the rewrite's names are the engine's. A guest can
// not import its host module, export (or run) its stop flag, nor can a
// host module take the name.
func TestPreemptReserved(t *testing.T) {
	ctx := context.Background()
	e := newTestEngine(t, sandbox.Config{})
	if err := e.Host(wasmbin.PreemptModule, []sandbox.HostFunc{{Name: wasmbin.PreemptYield, Fn: func(context.Context, sandbox.Memory, []uint64) {}}}); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("Host(%s) = %v, want it refused as reserved", wasmbin.PreemptModule, err)
	}

	mem := wasmasm.Section(5, []byte{0x01, 0x00, 0x01})
	imports := wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec([]byte{0x60, 0x00, 0x00})),
		wasmasm.Section(2, wasmasm.Vec(wasmasm.Cat(wasmasm.Name(wasmbin.PreemptModule), wasmasm.Name(wasmbin.PreemptYield), []byte{0x00, 0x00}))),
		mem,
	)
	if _, err := e.Compile(ctx, imports); err == nil || !strings.Contains(err.Error(), wasmbin.PreemptModule) {
		t.Errorf("Compile of a module importing %s = %v, want an error naming it", wasmbin.PreemptModule, err)
	}
	exports := wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec([]byte{0x60, 0x00, 0x00})),
		wasmasm.Section(3, wasmasm.Vec([]byte{0x00})),
		mem,
		wasmasm.Section(6, wasmasm.Vec([]byte{0x7f, 0x01, 0x41, 0x00, 0x0b})),
		wasmasm.Section(7, wasmasm.Vec(wasmasm.Cat(wasmasm.Name(wasmbin.StopExport), []byte{0x03, 0x00}))),
		wasmasm.Section(10, wasmasm.Vec([]byte{0x02, 0x00, 0x0b})),
	)
	if _, err := e.Compile(ctx, exports); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("Compile of a module exporting %s = %v, want it refused as reserved", wasmbin.StopExport, err)
	}

	// The flag the rewrite exports is not the guest's: an entry of that
	// name does not exist.
	m, err := e.Compile(ctx, sandboxtest.SpinModule())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	if _, ok := m.(*Module).c.allExports[wasmbin.StopExport]; ok {
		t.Errorf("the module's exports list %s", wasmbin.StopExport)
	}
	err = m.Run(ctx, sandbox.RunConfig{Entry: wasmbin.StopExport, Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "does not export") {
		t.Errorf("Run with entry %s = %v, want 'does not export'", wasmbin.StopExport, err)
	}
}

// TestCacheKeyChanged: code compiled with WithCloseOnContextDone (what
// engines did before the rewrite) is not what an engine loads now. The
// compilation cache is keyed by the bytes compiled and that flag.
func TestCacheKeyChanged(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	files := func() int {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, d := range entries {
			if d.IsDir() {
				sub, _ := os.ReadDir(dir + "/" + d.Name())
				n += len(sub)
			}
		}
		return n
	}
	counts := map[preemption]int{}
	for _, p := range []preemption{preemptCloseOnDone, preemptRewrite} {
		e, err := newEngine(ctx, sandbox.Config{CacheDir: dir}, options{preempt: p, noSnapshot: true})
		if err != nil {
			t.Fatal(err)
		}
		m, err := e.Compile(ctx, sandboxtest.SpinModule())
		if err != nil {
			t.Fatal(err)
		}
		m.Close(ctx)
		e.Close(ctx)
		counts[p] = files()
	}
	if counts[preemptRewrite] <= counts[preemptCloseOnDone] {
		t.Errorf("cache files: %d after compiling with CloseOnContextDone, %d after the rewrite; want a new one", counts[preemptCloseOnDone], counts[preemptRewrite])
	}
}

// TestGCDeadlockWithoutPreemption is the control of the conformance
// suite's GCWhileSpinning: with no preemption at all, a collection during
// a spinning guest never finishes. It runs in a child process (the
// deadlock takes the whole process). The child starts a spinning guest
// and then collects, again and again: a collection may finish before the
// guest's goroutine first runs on a loaded machine, but not once it spins.
// The test waits for a collection that began and has not finished while
// the child's output stood still for 3 s; a child that finishes them all
// reproduces nothing. Nothing here is a deadline on the machine's speed:
// each wait is for an event, bounded only against a child that hangs
// before it starts.
func TestGCDeadlockWithoutPreemption(t *testing.T) {
	if os.Getenv("MANDATE_TEST_GC_DEADLOCK") == "child" {
		gcDeadlockChild()
		return
	}
	if testing.Short() {
		t.Skip("runs a child process for seconds")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestGCDeadlockWithoutPreemption$")
	cmd.Env = append(os.Environ(), "MANDATE_TEST_GC_DEADLOCK=child")
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()
	last, still := "", time.Now()
	for {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("the child's collections all finished (%v); the reproduction reproduces nothing:\n%s", err, out.String())
		case <-time.After(100 * time.Millisecond):
		}
		now := out.String()
		if now != last {
			last, still = now, time.Now()
			continue
		}
		lines := strings.Split(strings.TrimSpace(now), "\n")
		if strings.HasPrefix(lines[len(lines)-1], "collecting ") && time.Since(still) > 3*time.Second {
			return // a collection that began and never ended: the deadlock
		}
		if time.Since(still) > 5*time.Minute {
			t.Fatalf("the child printed nothing for 5 minutes and is not collecting:\n%s", now)
		}
	}
}

// lockedBuffer is a bytes.Buffer a child process writes while the test
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func gcDeadlockChild() {
	ctx := context.Background()
	e, err := newEngine(ctx, sandbox.Config{}, options{preempt: preemptNone})
	if err != nil {
		panic(err)
	}
	m, err := e.Compile(ctx, sandboxtest.SpinModule())
	if err != nil {
		panic(err)
	}
	go m.Run(ctx, sandbox.RunConfig{Entry: "run"})
	for i := range 100 {
		time.Sleep(100 * time.Millisecond)
		fmt.Printf("collecting %d\n", i)
		runtime.GC()
		fmt.Printf("collected %d\n", i)
	}
	os.Exit(0)
}

// TestStopOutcome: the rewrite stops a run with the errors
// WithCloseOnContextDone gave, on both paths (the flag, and yield finding
// the context done when the budget is spent).
func TestStopOutcome(t *testing.T) {
	ctx := context.Background()
	for name, opt := range map[string]options{
		"rewrite":          {},
		"rewrite-budget-1": {preemptBudget: 1}, // yield at every check
		"closeondone":      {preempt: preemptCloseOnDone},
	} {
		t.Run(name, func(t *testing.T) {
			e, err := newEngine(ctx, sandbox.Config{CacheDir: testCacheDir}, opt)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close(ctx)
			m, err := e.Compile(ctx, sandboxtest.SpinModule())
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(ctx)
			if err := m.Run(ctx, sandbox.RunConfig{Entry: "run", Timeout: 50 * time.Millisecond}); !errors.Is(err, sandbox.ErrTimeout) {
				t.Errorf("Run = %v, want ErrTimeout", err)
			}
			cctx, cancel := context.WithCancel(ctx)
			time.AfterFunc(50*time.Millisecond, cancel)
			if err := m.Run(cctx, sandbox.RunConfig{Entry: "run"}); !errors.Is(err, sandbox.ErrCanceled) {
				t.Errorf("Run = %v, want ErrCanceled", err)
			}
		})
	}
}

// TestCompileCountBombs: a module whose counts claim more than it holds is
// refused before wazero reads it. wazero allocates what a count says first:
// each of these killed the process with "out of memory" (the reactors
// through the snapshot's init, which compiles the module too).
func TestCompileCountBombs(t *testing.T) {
	ctx := context.Background()
	e := newTestEngine(t, sandbox.Config{})
	huge := []byte{0xff, 0xff, 0xff, 0xff, 0x0f}
	module := func(export string, extra ...[]byte) []byte {
		secs := [][]byte{
			wasmasm.Section(1, wasmasm.Vec([]byte{0x60, 0x00, 0x00})),
			wasmasm.Section(3, wasmasm.Vec([]byte{0x00})),
			wasmasm.Section(5, []byte{0x01, 0x00, 0x01}),
			wasmasm.Section(7, wasmasm.Vec(append(wasmasm.Name(export), 0x00, 0x00))),
		}
		return wasmasm.Module(append(secs, extra...)...)
	}
	code := wasmasm.Section(10, wasmasm.Vec([]byte{0x02, 0x00, 0x0b}))
	for _, export := range []string{"_start", "_initialize"} {
		for name, wasm := range map[string][]byte{
			"data segments":    module(export, code, wasmasm.Section(11, huge)),
			"element segments": module(export, wasmasm.Section(9, huge), code),
			"locals":           module(export, wasmasm.Section(10, wasmasm.Vec(wasmasm.Cat([]byte{0x08, 0x01}, huge, []byte{0x7f, 0x0b})))),
			"names":            module(export, code, wasmasm.Section(0, wasmasm.Name("name"), []byte{0x01, 0x05}, huge)),
		} {
			t.Run(export+"/"+name, func(t *testing.T) {
				if m, err := e.Compile(ctx, wasm); err == nil {
					m.Close(ctx)
					t.Fatal("Compile succeeded")
				}
			})
		}
	}
}
