package cli

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
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
	manifest := auditedManifest(t, dir, "fetch", "cli-guest")
	state := filepath.Join(dir, "state")
	cache := testCache()
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
	ids := checkSharedRuns(t, state, n)
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
}
