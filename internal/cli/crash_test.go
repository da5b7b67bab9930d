package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/internal/testbin"
	"github.com/mandatevm/mandate/runstore"
)

// TestCrashKeepsTheAuditLog kills `mandate run` (SIGKILL) in the middle of
// a run making audited calls. The audit log then opens, verifies, and has
// an entry for every effect that happened: each entry is durable before
// its effect (write-ahead).
func TestCrashKeepsTheAuditLog(t *testing.T) {
	if testing.Short() || runtime.GOOS == "windows" {
		t.Skip("builds mandate and kills it")
	}
	var seen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		w.Write([]byte("ok"))
	}))
	defer srv.Close()

	dir := t.TempDir()
	bin := buildMandate(t)
	manifest := auditedManifest(t, dir, "loop", "cli-loop")
	state := filepath.Join(dir, "state")
	cmd := exec.Command(bin, "run", manifest, "--var", "origin="+srv.URL, "--state-dir", state, "--log-level", "off")
	cmd.Env = append(os.Environ(), "MANDATE_CACHE_DIR="+testCache())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for seen.Load() < 30 {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("only %d requests after 2 minutes", seen.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	effects := seen.Load()

	log, err := audit.Open(filepath.Join(state, "audit.db"))
	if err != nil {
		t.Fatalf("the audit log does not open after a crash: %v", err)
	}
	defer log.Close()
	if _, err := log.Verify(context.Background()); err != nil {
		t.Fatalf("the audit log does not verify after a crash: %v", err)
	}
	entries, err := log.Entries(context.Background(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	allows := 0
	for _, e := range entries {
		if e.Op == "call:fetch" && e.Decision == "allow" {
			allows++
		}
	}
	if int64(allows) < effects {
		t.Fatalf("%d fetches reached the server but only %d were logged before their effect", effects, allows)
	}
	// The run store opens too, and shows the killed run as crashed (begun,
	// never finished, its process gone), with the same id as its audit
	// entries.
	store, err := openStore(state)
	if err != nil {
		t.Fatalf("the run store does not open after a crash: %v", err)
	}
	defer store.Close()
	runs, err := store.List(context.Background())
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs after the crash: %v, %v", runs, err)
	}
	if r := runs[0]; r.State != runstore.StateCrashed || !r.Ended.IsZero() || len(entries) == 0 || entries[0].Run != r.ID {
		t.Errorf("the killed run: %+v (audit run %q)", r.Run, entries[0].Run)
	}
	t.Logf("killed after %d effects; %d allow entries, %d entries in all", effects, allows, len(entries))
}

// buildMandate builds cmd/mandate (with the engine under test) once per
// test binary and returns its path.
func buildMandate(t *testing.T) string { return testbin.Mandate(t) }

// TestConcurrentProcesses runs several `mandate run` processes at once on
// one state directory, each making audited calls: every run is recorded
// whole in the run store, every one has its audit entries, and the shared
// audit log verifies.
func TestConcurrentProcesses(t *testing.T) {
	if testing.Short() || runtime.GOOS == "windows" {
		t.Skip("builds mandate and runs it in several processes")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("results")) }))
	defer srv.Close()
	bin := buildMandate(t)
	dir := t.TempDir()
	manifest := auditedManifest(t, dir, "fetch", "cli-guest")
	state := filepath.Join(dir, "state")
	const n = 4
	cmds := make([]*exec.Cmd, n)
	outs := make([]bytes.Buffer, n)
	for i := range cmds {
		cmd := exec.Command(bin, "run", manifest, "--var", "origin="+srv.URL, "--input", filepath.Join(dir, "fetch.in"),
			"--state-dir", state, "--log-level", "warn")
		cmd.Env = append(os.Environ(), "MANDATE_CACHE_DIR="+testCache())
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("process %d: %v\n%s", i, err, &outs[i])
		}
	}
	checkSharedRuns(t, state, n)
}
