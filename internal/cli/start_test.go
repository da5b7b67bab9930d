package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/wasmasm"
	"github.com/mandatevm/mandate/sandbox/sandboxtest"
)

// TestStopDuringInit interrupts `mandate run` (SIGINT as Ctrl-C sends it,
// and SIGTERM) while its task's module initialises forever: a recursion
// with no loop, and a loop; and while the module compiles (50,000 nested
// loops, which the manifest's limits let through to the compiler: a
// minute and more of wazero's). mandate ends, exits 130 and records the
// run as interrupted. Before a module's init was its task's, a snapshot's
// init ran outside it, and the recursion was never stopped: only SIGKILL
// ended mandate.
func TestStopDuringInit(t *testing.T) {
	if testing.Short() || runtime.GOOS == "windows" {
		t.Skip("builds mandate and signals it")
	}
	bin := buildMandate(t)
	for _, mod := range []struct {
		name   string
		wasm   []byte
		limits string // more of the manifest's limits block
		when   string // what stderr says once it is in that state
	}{
		{"fanout", sandboxtest.FanoutInitModule(), "", "task started"},
		{"loop", sandboxtest.LoopInitModule(), "", "task started"},
		{"compile", wasmasm.NestedLoops(50_000), "    nesting = 100000\n", "engine started"},
	} {
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
			t.Run(mod.name+"-"+sig.String(), func(t *testing.T) {
				dir := t.TempDir()
				wasm := filepath.Join(dir, mod.name+".wasm")
				if err := os.WriteFile(wasm, mod.wasm, 0o644); err != nil {
					t.Fatal(err)
				}
				man := filepath.Join(dir, "init.hcl")
				src := "task \"init\" {\n  module    = \"" + filepath.ToSlash(wasm) + "\"\n  principal = \"alice\"\n  limits {\n    timeout = \"5m\"\n" + mod.limits + "  }\n}\n"
				if err := os.WriteFile(man, []byte(src), 0o644); err != nil {
					t.Fatal(err)
				}
				state := filepath.Join(dir, "state")
				started := make(chan struct{})
				stderr := &watchWriter{pattern: mod.when, fire: func() { close(started) }}
				cmd := exec.Command(bin, "run", man, "--state-dir", state, "--log-level", "info")
				cmd.Env = append(os.Environ(), "MANDATE_CACHE_DIR="+filepath.Join(dir, "cache"))
				cmd.Stdout, cmd.Stderr = &bytes.Buffer{}, stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				exited := make(chan error, 1)
				go func() { exited <- cmd.Wait() }()
				select {
				case <-started:
				case err := <-exited:
					t.Fatalf("mandate ended before its task started: %v\n%s", err, stderr)
				case <-time.After(2 * time.Minute):
					cmd.Process.Kill()
					t.Fatalf("no %q in 2 minutes\n%s", mod.when, stderr)
				}
				// The init or the compile is running (neither ends soon);
				// stop mandate.
				signaled := time.Now()
				if err := cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				var err error
				select {
				case err = <-exited:
				case <-time.After(time.Minute): // a hang, not a slow machine
					cmd.Process.Kill()
					<-exited
					t.Fatalf("mandate still running a minute after %v\n%s", sig, stderr)
				}
				t.Logf("mandate ended %v after %v", time.Since(signaled).Round(time.Millisecond), sig)
				if code := cmd.ProcessState.ExitCode(); code != exitInterrupted {
					t.Fatalf("exit code %d (%v), want %d\n%s", code, err, exitInterrupted, stderr)
				}
				if !strings.Contains(stderr.String(), "mandate: interrupted") {
					t.Errorf("stderr says nothing of the interrupt:\n%s", stderr)
				}
				r, err := readRecord(context.Background(), state, "")
				if err != nil {
					t.Fatal(err)
				}
				if r.Run.Exit != exitInterrupted {
					t.Errorf("recorded exit %d, want %d (interrupted)", r.Run.Exit, exitInterrupted)
				}
			})
		}
	}
}
