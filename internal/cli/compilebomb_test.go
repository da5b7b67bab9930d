package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/wasmasm"
	"github.com/mandatevm/mandate/runstore"
)

// TestCompileBombRefused: "mandate run" of a module past a static limit
// (issue 24's 500,000 nested blocks) is refused at once, before its task
// starts, with the usage code and an error naming the limit, recorded;
// raising the limit in the manifest is how a person who means it says so
// (here a tight one refuses the same way, naming it).
func TestCompileBombRefused(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.WriteFile(filepath.Join(dir, "bomb.wasm"), wasmasm.NestedBlocks(500_000), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "funcs.wasm"), wasmasm.Functions(10), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		manifest, want string
	}{
		{`task "bomb" {
  module    = "bomb.wasm"
  principal = "alice"
  limits {
    timeout = "5s"
    memory  = "64MiB"
  }
}
`, "function 0 nests blocks 500000 deep; the limit (limits { nesting }) is 2500"},
		{`task "funcs" {
  module    = "funcs.wasm"
  principal = "alice"
  limits {
    functions = 5
  }
}
`, "the module defines 10 functions; the limit (limits { functions }) is 5"},
	} {
		p := filepath.Join(dir, "run.hcl")
		if err := os.WriteFile(p, []byte(tt.manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		var o, e bytes.Buffer
		start := time.Now()
		code := Main([]string{"run", p, "--state-dir", state, "--cache-dir", filepath.Join(dir, "cache"), "--log-level", "off"}, nil, &o, &e)
		if code != exitUsage || !strings.Contains(e.String(), tt.want) {
			t.Fatalf("exit %d, stderr %q; want %d and %q", code, e.String(), exitUsage, tt.want)
		}
		// The error names the static limit: refused before any compiler
		// saw the module (compiling the bomb holds a core past a minute).
		t.Logf("refused after %v", time.Since(start).Round(time.Millisecond))
	}
	runs := listRuns(t, state)
	if len(runs) != 2 {
		t.Fatalf("%d runs recorded, want 2", len(runs))
	}
	for _, r := range runs {
		if r.State != runstore.StateRefused || r.Exit != exitUsage || !strings.Contains(r.Error, "(limits { ") {
			t.Errorf("recorded %+v", r)
		}
	}
}
