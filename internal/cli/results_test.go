package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/runstore"
	"github.com/mandatevm/mandate/sandbox"
)

// TestLargeChildResult (issue 24): a child returns a 48 MiB result, its
// parent makes it its own. The run store keeps at most limits.stored_output
// of each (1 MiB by default), says it cut them and their whole size, and
// runs.db grows by about that per run, not by the results (96 MiB before);
// mandate's peak memory (of a "mandate run" process: the test binary run as
// mandate) stays within a small multiple of the task's memory limit above
// the same run with a 1-byte result (it was 3 to 5 times the limit).
func TestLargeChildResult(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a guest, runs mandate with a 48 MiB result")
	}
	const (
		size   = 48 << 20
		memory = 128 << 20
	)
	ctx := context.Background()
	guest, err := filepath.Abs(filepath.Join("..", "..", "testdata", "guests", "result-big"))
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := host.BuildGuest(ctx, guest, false, testCache())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "big.wasm"), wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	manifest := func(name, extra string) string {
		p := filepath.Join(dir, name+".hcl")
		src := fmt.Sprintf(`task %q {
  module    = "big.wasm"
  principal = "alice"
  limits {
    memory  = "%dMiB"
    timeout = "2m"
    %s
  }
  cap "spawn" "spawner" {
    modules = ["big.wasm"]
  }
}
`, name, memory>>20, extra)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	byDefault, small := manifest("big", ""), manifest("small", `stored_output = "64KiB"`)
	input := func(n int, read bool) string {
		p := filepath.Join(dir, fmt.Sprintf("in-%d-%v.json", n, read))
		b, _ := json.Marshal(map[string]any{"mode": "parent", "self": sandbox.Digest(wasm), "size": n, "read": read})
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The test binary is mandate when it is called so (testscript.Main).
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin", "mandate")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(exe, bin); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	db := filepath.Join(state, runstore.FileName)
	// run runs mandate; it returns its stdout, its peak RSS and how much
	// runs.db grew.
	run := func(args ...string) (stdout []byte, peak, grew int64) {
		t.Helper()
		before := int64(0)
		if _, err := os.Stat(db); err == nil {
			before = fileSize(t, db)
		}
		cmd := exec.Command(bin, append([]string{"run", "--state-dir", state, "--cache-dir", testCache()}, args...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("mandate run %s: %v\n%s", strings.Join(args, " "), err, errb.Bytes())
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		return out.Bytes(), ru.Maxrss << 10, fileSize(t, db) - before
	}
	const MiB = 1 << 20
	_, base, _ := run(byDefault, "--input", input(1, false))
	_, base2, _ := run(byDefault, "--input", input(1, false))
	base = max(base, base2)
	t.Logf("a 1-byte result: peak RSS %.0f MiB", float64(base)/MiB)
	for _, c := range []struct {
		name    string
		args    []string
		keep    int64
		tasks   int
		json    bool
		maxPeak int64
	}{
		{"by handle", []string{byDefault, "--input", input(size, false)}, kernel.DefaultMaxStoredOutput, 2, false, 0},
		{"by handle, again", []string{byDefault, "--input", input(size, false)}, kernel.DefaultMaxStoredOutput, 2, false, 0},
		{"read by the parent", []string{byDefault, "--input", input(size, true)}, kernel.DefaultMaxStoredOutput, 2, false, 0},
		{"json report", []string{byDefault, "--input", input(size, true), "--format", "json"}, kernel.DefaultMaxStoredOutput, 2, true, 0},
		{"stored_output 64KiB", []string{small, "--input", input(size, false)}, 64 << 10, 2, false, 0},
	} {
		out, peak, grew := run(c.args...)
		t.Logf("%s: peak RSS %.0f MiB (%.0f MiB above the 1-byte run; the task's memory limit is %d MiB); runs.db grew %.2f MiB",
			c.name, float64(peak)/MiB, float64(peak-base)/MiB, memory/MiB, float64(grew)/MiB)
		// The whole result is the answer, however little is kept.
		if c.json {
			var rep struct{ Result string }
			if err := json.Unmarshal(out, &rep); err != nil || len(rep.Result) != size || !utf8.ValidString(rep.Result) {
				t.Errorf("%s: the report's result has %d bytes (%v), want %d", c.name, len(rep.Result), err, size)
			}
		} else if len(out) != size || !bytes.HasPrefix(out, []byte("abcdefghijklmnopqrstuvwxyzab")) {
			t.Errorf("%s: printed %d bytes, want the %d of the result", c.name, len(out), size)
		}
		// A generous bound: the store keeps each task's result cut to
		// the bound, plus a little for the run's rows and the pages
		// SQLite rounds to.
		if limit := int64(c.tasks)*c.keep + 512<<10; grew > limit {
			t.Errorf("%s: runs.db grew by %d bytes, want at most %d (%d tasks' results of %d bytes kept)", c.name, grew, limit, c.tasks, c.keep)
		}
		if limit := base + 5*memory/2; peak > limit {
			t.Errorf("%s: peak RSS %d bytes, want at most %d (the 1-byte run's %d + 2.5 x the task's memory limit)", c.name, peak, limit, base)
		}
		// The record says what it cut, and the whole size.
		s, err := runstore.OpenReadOnly(state)
		if err != nil {
			t.Fatal(err)
		}
		outs, err := s.Outputs(ctx, "", "")
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		results := 0
		for _, o := range outs {
			if o.Stream != runstore.StreamResult {
				continue
			}
			results++
			if int64(len(o.Data)) != c.keep || !o.Truncated || o.Dropped != size-c.keep || o.Size != size {
				t.Errorf("%s: task %s's result kept as %d bytes, truncated %v, dropped %d, size %d; want %d, true, %d, %d",
					c.name, o.Task, len(o.Data), o.Truncated, o.Dropped, o.Size, c.keep, size-c.keep, size)
			}
		}
		if results != c.tasks {
			t.Errorf("%s: %d results recorded, want %d", c.name, results, c.tasks)
		}
	}
}

// TestWriteJSONWith: a result streamed into the report in pieces is the
// bytes writeJSON writes of the whole, pieces cut inside runes, escapes
// (HTML, U+2028, DEL and C1 controls) and base64 included.
func TestWriteJSONWith(t *testing.T) {
	type rep struct {
		A      string  `json:"a"`
		Result *string `json:"result,omitempty"`
		B64    *string `json:"result_base64,omitempty"`
		Z      string  `json:"z"`
	}
	unit := "é<&>\u2028\x7f\u009b\"\\\n\t€😀x"
	text := []byte(strings.Repeat(unit, 20000)) // pieces end inside runes
	bin := bytes.Repeat([]byte{0xff, 0, 1, 2, 0xfe}, 30001)
	for _, c := range []struct {
		name string
		data []byte
		text bool
	}{{"text", text, true}, {"binary", bin, false}, {"empty", []byte{}, true}, {"short", []byte("hi"), true}} {
		whole := string(c.data)
		want := rep{A: "\u0085a", Z: "z"}
		got := want
		ph := "mandate-result-0123"
		if c.text {
			want.Result, got.Result = &whole, &ph
		} else {
			b, _ := json.Marshal(c.data)
			var s string
			json.Unmarshal(b, &s)
			want.B64, got.B64 = &s, &ph
		}
		var w, g bytes.Buffer
		if err := writeJSON(&w, want); err != nil {
			t.Fatal(err)
		}
		if err := writeJSONWith(&g, got, ph, c.data, c.text); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(w.Bytes(), g.Bytes()) {
			t.Errorf("%s: streamed %d bytes differ from writeJSON's %d", c.name, g.Len(), w.Len())
		}
	}
}
