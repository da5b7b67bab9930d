package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/manifest"
)

// watchWriter collects output and calls fire once when pattern appears.
type watchWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	pattern string
	fire    func()
	fired   bool
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.fired && strings.Contains(w.buf.String(), w.pattern) {
		w.fired = true
		w.fire()
	}
	return len(p), nil
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestInterrupt cancels a run the way Ctrl-C does once its task has
// started: the task is killed, the run exits 130 and is recorded.
func TestInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a guest")
	}
	guests, err := filepath.Abs("testdata/guests")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	man := filepath.Join(dir, "spin.hcl")
	src := `task "spin" {
  module    = "` + filepath.ToSlash(filepath.Join(guests, "cli-guest")) + `"
  principal = "alice"
  limits {
    timeout = "5m"
  }
}
`
	if err := os.WriteFile(man, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "spin.in")
	if err := os.WriteFile(in, []byte("spin"), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := false
	stderr := &watchWriter{pattern: "task started", fire: cancel}
	var stdout bytes.Buffer
	e := &env{stdout: &stdout, stderr: stderr, getenv: func(string) string { return "" }}
	state := filepath.Join(dir, "state")
	code := e.runTask(ctx, func() { stopped = true }, runOptions{
		manifest: man,
		input:    in,
		vars:     varFlag{},
		level:    hclog.Info,
		engine:   testengine.Name(),
		cache:    testCache(),
		state:    state,
	})
	if code != exitInterrupted {
		t.Fatalf("exit code: got %d, want %d\nstderr:\n%s", code, exitInterrupted, stderr)
	}
	if !stopped {
		t.Error("the signal handler was not reset after the interrupt")
	}
	if !strings.Contains(stderr.String(), "mandate: interrupted: task t1 was killed") {
		t.Errorf("stderr:\n%s", stderr)
	}
	r, err := readRecord(context.Background(), state, "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Run.Exit != exitInterrupted || len(r.Tasks) != 1 || r.Tasks[0].State != kernel.TaskKilled {
		t.Errorf("record: got run %+v, tasks %+v", r.Run, r.Tasks)
	}
}

func TestVarFlag(t *testing.T) {
	v := varFlag{}
	for _, s := range []string{"a=1", "b_2=x=y", "a=3", "e="} {
		if err := v.Set(s); err != nil {
			t.Errorf("Set(%q): %v", s, err)
		}
	}
	if v["a"] != "3" || v["b_2"] != "x=y" || v["e"] != "" || v.String() != "a,b_2,e" {
		t.Errorf("got %v", v)
	}
	for _, s := range []string{"novalue", "=x", "1a=x", "a.b=x", "a b=x"} {
		if err := v.Set(s); err == nil {
			t.Errorf("Set(%q): no error", s)
		}
	}
}

func TestParseInterspersed(t *testing.T) {
	c := lookupCommand("run")
	tests := []struct {
		args []string
		pos  []string
		vars string
	}{
		{[]string{"m.hcl"}, []string{"m.hcl"}, ""},
		{[]string{"m.hcl", "--var", "a=1", "-var=b=2"}, []string{"m.hcl"}, "a,b"},
		{[]string{"--var", "a=1", "m.hcl", "x"}, []string{"m.hcl", "x"}, "a"},
		{[]string{"--", "--var"}, []string{"--var"}, ""},
		{[]string{"m.hcl", "--", "--var", "a=1"}, []string{"m.hcl", "--var", "a=1"}, ""},
	}
	for _, tt := range tests {
		fs := flagSet("run")
		v := varFlag{}
		fs.Var(v, "var", "")
		e := &env{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
		pos, _, ok := e.parse(c, fs, tt.args)
		if !ok || strings.Join(pos, " ") != strings.Join(tt.pos, " ") || v.String() != tt.vars {
			t.Errorf("parse(%q) = %q, %t, vars %q; want %q, vars %q", tt.args, pos, ok, v.String(), tt.pos, tt.vars)
		}
	}
}

// TestRunHelpHasTheGrammar: "mandate run --help" shows the manifest
// package's grammar (which a manifest test checks against the schemas).
func TestRunHelpHasTheGrammar(t *testing.T) {
	if !strings.Contains(runHelp, tabIndent(manifest.Grammar)) {
		t.Error("mandate run --help does not show manifest.Grammar")
	}
}
