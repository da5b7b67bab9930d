package cli

import (
	"context"
	"fmt"
	"github.com/mandatevm/mandate/internal/testengine"
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
	bin := filepath.Join(dir, "mandate")
	build := exec.Command("go", append([]string{"build", "-o", bin}, append(testengine.BuildFlags(), "../../cmd/mandate")...)...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	guest, _ := filepath.Abs("testdata/guests/cli-loop")
	manifest := filepath.Join(dir, "loop.hcl")
	os.WriteFile(manifest, []byte(fmt.Sprintf(`task "loop" {
  module    = %q
  principal = "alice"
  cap "net" "web" {
    origin        = var.origin
    paths         = ["/search"]
    allow_private = true
    audit         = true
  }
}
`, guest)), 0o644)
	state := filepath.Join(dir, "state")
	cmd := exec.Command(bin, "run", manifest, "--var", "origin="+srv.URL, "--state-dir", state, "--log-level", "off")
	cmd.Env = append(os.Environ(), "MANDATE_CACHE_DIR="+filepath.Join(os.TempDir(), "mandate-crash-test-cache"))
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
	// The run store opens too, and shows the killed run as begun but never
	// finished, with the same id as its audit entries.
	store, err := openStore(state)
	if err != nil {
		t.Fatalf("the run store does not open after a crash: %v", err)
	}
	defer store.Close()
	runs, err := store.List(context.Background())
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs after the crash: %v, %v", runs, err)
	}
	if r := runs[0]; r.State != "running" || !r.Ended.IsZero() || len(entries) == 0 || entries[0].Run != r.ID {
		t.Errorf("the killed run: %+v (audit run %q)", r.Run, entries[0].Run)
	}
	t.Logf("killed after %d effects; %d allow entries, %d entries in all", effects, allows, len(entries))
}
