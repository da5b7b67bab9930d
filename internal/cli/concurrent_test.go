package cli

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mandatevm/mandate/audit"
)

// TestConcurrentRunsShareTheAuditLog runs several `mandate run`s at once
// against one state directory, each with its own audit.Log on the same
// file: every run is recorded, every audited decision is in the log, and
// the log verifies.
func TestConcurrentRunsShareTheAuditLog(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs guests")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("results")) }))
	defer srv.Close()
	dir := t.TempDir()
	guest, _ := filepath.Abs("testdata/guests/cli-guest")
	manifest := filepath.Join(dir, "fetch.hcl")
	os.WriteFile(manifest, []byte(fmt.Sprintf(`task "fetch" {
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
	os.WriteFile(filepath.Join(dir, "fetch.in"), []byte("fetch\n"), 0o644)
	state := filepath.Join(dir, "state")
	cache := filepath.Join(os.TempDir(), "mandate-concurrent-test-cache")
	const n = 4
	var wg sync.WaitGroup
	codes := make([]int, n)
	errs := make([]bytes.Buffer, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var out bytes.Buffer
			codes[i] = Main([]string{"run", manifest, "--var", "origin=" + srv.URL, "--input", filepath.Join(dir, "fetch.in"),
				"--state-dir", state, "--cache-dir", cache, "--log-level", "off"}, nil, &out, &errs[i])
		}(i)
	}
	wg.Wait()
	for i, c := range codes {
		if c != 0 {
			t.Fatalf("run %d exited %d: %s", i, c, &errs[i])
		}
	}
	s, err := openStore(state)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := s.List(context.Background())
	s.Close()
	if err != nil || len(runs) != n {
		t.Fatalf("%d runs recorded (%v), want %d", len(runs), err, n)
	}
	var ids []string
	for _, r := range runs {
		if r.State != "done" || r.Tasks != 1 {
			t.Errorf("run %s: %+v", r.ID, r)
		}
		ids = append(ids, r.ID)
	}
	log, err := audit.Open(auditPath(state))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	rep, err := log.Verify(context.Background())
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	for _, id := range ids {
		es, err := log.Entries(context.Background(), audit.Filter{Run: id})
		if err != nil || len(es) == 0 {
			t.Errorf("run %s has %d audit entries (%v)", id, len(es), err)
		}
	}
	// audit verify RUN: each run's entries are covered by a signature.
	for _, id := range ids {
		var out, errOut bytes.Buffer
		if code := Main([]string{"audit", "verify", id, "--state-dir", state}, nil, &out, &errOut); code != 0 {
			t.Fatalf("audit verify %s: exit %d: %s", id, code, &errOut)
		}
		if !strings.Contains(out.String(), "run "+id+": ") || !strings.Contains(out.String(), "all covered by the signed checkpoint") {
			t.Errorf("audit verify %s:\n%s", id, &out)
		}
	}
	if rep.Checkpoints != n {
		t.Errorf("%d checkpoints, want one per run (%d)", rep.Checkpoints, n)
	}
}
