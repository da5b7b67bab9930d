package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
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
	cache := filepath.Join(os.TempDir(), "mandate-concurrent-test-cache")
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
	run := func(manifest string) int {
		var o, e bytes.Buffer
		return Main([]string{"run", manifest, "--state-dir", state, "--cache-dir", cache, "--log-level", "off"}, nil, &o, &e)
	}
	if code := run(good); code != 0 {
		t.Fatalf("the good run exited %d", code)
	}
	for _, m := range []string{broken, nogrant} {
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
	if len(runs) != 3 {
		t.Fatalf("%d runs recorded, want 3", len(runs))
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
