package cli

import (
	"bytes"
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mandatevm/mandate/runstore"
)

// TestRefusedRunsEnd: a run refused after it was recorded as started (a
// module that does not compile, a grant that cannot be made) ends
// "refused" with its reason and exit code, never "running"; and
// "mandate graph" with no run shows the last run that ran.
func TestRefusedRunsEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a guest")
	}
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	cache := testCache()
	guest, err := filepath.Abs(filepath.Join("testdata", "guests", "cli-guest"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.hcl", `task "good" {
  module    = "`+filepath.ToSlash(guest)+`"
  principal = "alice"
}
`)
	write("broken.wasm", "\x00asm\x01\x00\x00\x00\x01\xff\xff")
	broken := write("broken.hcl", `task "broken" {
  module    = "broken.wasm"
  principal = "alice"
}
`)
	nogrant := write("nogrant.hcl", `task "nogrant" {
  module    = "`+filepath.ToSlash(guest)+`"
  principal = "alice"
  cap "net" "web" {
    origin  = "https://a.example"
    headers = [{ name = "X-Key", env = "MANDATE_TEST_UNSET_VARIABLE" }]
  }
}
`)
	write("bad-seed.json", `{"records": [{"id": 1, "this is": "not a record"`)
	badseed := write("badseed.hcl", `task "badseed" {
  module    = "`+filepath.ToSlash(guest)+`"
  principal = "alice"
  seed "benefits" {
    file = "bad-seed.json"
  }
}
`)
	run := func(manifest string) int {
		var o, e bytes.Buffer
		return Main([]string{"run", manifest, "--state-dir", state, "--cache-dir", cache, "--log-level", "off"}, nil, &o, &e)
	}
	if code := run(good); code != 0 {
		t.Fatalf("the good run exited %d", code)
	}
	for _, m := range []string{broken, nogrant, badseed} {
		if code := run(m); code != exitUsage {
			t.Fatalf("%s exited %d, want %d", m, code, exitUsage)
		}
	}
	s, err := runstore.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runs, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 4 {
		t.Fatalf("%d runs recorded, want 4", len(runs))
	}
	for _, r := range runs {
		if r.Task == "good" {
			continue
		}
		if r.State != runstore.StateRefused || r.Exit != exitUsage || r.Error == "" {
			t.Errorf("run of %s: state %q exit %d error %q; want refused, %d, a reason", r.Task, r.State, r.Exit, r.Error, exitUsage)
		}
	}
	var o, e bytes.Buffer
	if code := Main([]string{"graph", "--state-dir", state}, nil, &o, &e); code != 0 {
		t.Fatalf("graph: exit %d: %s", code, &e)
	}
	if !strings.Contains(o.String(), "good.hcl") {
		t.Errorf("mandate graph shows a refused run, not the last one that ran:\n%s", &o)
	}
}

// TestNoRunOnABrokenLog: a run does not start on an audit log whose last
// entry was changed behind its back; the error names the file and how to
// inspect it, and no run is recorded.
func TestNoRunOnABrokenLog(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a guest")
	}
	f := newFetchRuns(t)
	state, run := f.state, f.run
	if code, stderr := run(); code != 0 {
		t.Fatalf("the first run: exit %d: %s", code, stderr)
	}
	db, err := sql.Open("sqlite", auditPath(state))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE entries SET reason = 'nothing happened' WHERE idx = (SELECT max(idx) FROM entries)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	code, stderr := run()
	if code != exitUsage || !strings.Contains(stderr, auditPath(state)) || !strings.Contains(stderr, "mandate audit verify") {
		t.Fatalf("a run on a changed log: exit %d, stderr:\n%s", code, stderr)
	}
	s, err := runstore.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if runs, _ := s.List(context.Background()); len(runs) != 1 {
		t.Errorf("%d runs recorded, want only the first", len(runs))
	}
}

// TestDamagedRunStoreFoundFirst: a run store whose pages were overwritten
// is found before the task runs (no request reaches the server), with the
// file named.
func TestDamagedRunStoreFoundFirst(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a guest")
	}
	f := newFetchRuns(t)
	state, run := f.state, f.run
	for i := 0; i < 3; i++ {
		if code, stderr := run(); code != 0 {
			t.Fatalf("run %d: exit %d: %s", i, code, stderr)
		}
	}
	before := f.requests.Load()
	path := filepath.Join(state, runstore.FileName)
	db, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The last pages: the tables a run's end writes (tasks, caps,
	// edges), which starting a run does not touch.
	fi, err := db.Stat()
	if err != nil {
		t.Fatal(err)
	}
	junk := bytes.Repeat([]byte{0xA5, 0x5A, 0x13, 0x37}, 2048)
	if _, err := db.WriteAt(junk, fi.Size()-int64(len(junk))); err != nil {
		t.Fatal(err)
	}
	db.Close()
	code, stderr := run()
	if code != exitUsage || !strings.Contains(stderr, path) {
		t.Fatalf("a run on a damaged store: exit %d, stderr:\n%s", code, stderr)
	}
	if n := f.requests.Load(); n != before {
		t.Errorf("the task ran (%d requests) on a store that could not record it", n-before)
	}
}

// fetchRuns runs cli-guest "fetch" under an audited manifest against a
// loopback server, in one state directory.
type fetchRuns struct {
	state    string
	requests atomic.Int64
	run      func() (int, string) // exit code and stderr
}

func newFetchRuns(t *testing.T) *fetchRuns {
	t.Helper()
	dir := t.TempDir()
	f := &fetchRuns{state: filepath.Join(dir, "state")}
	cache := testCache()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		w.Write([]byte("results"))
	}))
	t.Cleanup(srv.Close)
	manifest := auditedManifest(t, dir, "fetch", "cli-guest")
	f.run = func() (int, string) {
		var o, e bytes.Buffer
		code := Main([]string{"run", manifest, "--var", "origin=" + srv.URL, "--input", filepath.Join(dir, "fetch.in"),
			"--state-dir", f.state, "--cache-dir", cache, "--log-level", "off"}, nil, &o, &e)
		return code, e.String()
	}
	return f
}
