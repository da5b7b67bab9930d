package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// rawControl returns the first byte sequence in b a terminal would act on
// (C0 controls but tab and newline, DEL, C1 controls, invalid UTF-8), and
// its offset; -1 when there is none.
func rawControl(b []byte) (int, string) {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			return i, "invalid UTF-8"
		case r < 0x20 && r != '\n' && r != '\t', r == 0x7f, r >= 0x80 && r < 0xa0:
			return i, "control " + string(rune('0'+r/16)) // kind only
		}
		i += n
	}
	return -1, ""
}

// TestNoTerminalInjection: a guest puts terminal escapes into everything it
// can influence (cli-guest "inject"); nothing any human-readable output
// of mandate run, graph, audit, audit --denied and runs writes to a
// terminal may carry one raw. The task's result is escaped on a terminal,
// and written as it is to a pipe or with --raw.
func TestNoTerminalInjection(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a guest")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("results")) }))
	defer srv.Close()
	dir := t.TempDir()
	manifest := auditedManifest(t, dir, "inject", "cli-guest")
	if err := os.WriteFile(filepath.Join(dir, "inject.in"), []byte("inject\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	cache := testCache()
	var out, errOut bytes.Buffer
	// stdout is "a terminal": the result must come out escaped.
	term := &env{stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }, terminal: func(io.Writer) bool { return true }}
	code := term.main([]string{"run", manifest, "--var", "origin=" + srv.URL, "--input", filepath.Join(dir, "inject.in"),
		"--state-dir", state, "--cache-dir", cache, "--log-level", "debug"})
	if code != exitTaskFailed {
		t.Fatalf("the injecting guest: exit %d, want %d:\n%s", code, exitTaskFailed, &errOut)
	}
	check := func(what string, b []byte) {
		t.Helper()
		if i, why := rawControl(b); i >= 0 {
			lo, hi := max(i-60, 0), min(i+20, len(b))
			t.Errorf("%s carries a raw %s at byte %d: %q", what, why, i, b[lo:hi])
		}
	}
	check("mandate run's stdout", out.Bytes())
	check("mandate run's stderr", errOut.Bytes())
	if !strings.Contains(out.String(), `result \x1b[31mRED`) {
		t.Errorf("the result on a terminal: %q", out.String())
	}
	// Not a terminal (a pipe), or --raw: the bytes as the guest wrote them.
	for _, c := range []struct {
		terminal bool
		flags    []string
	}{{false, nil}, {true, []string{"--raw"}}} {
		var o, e bytes.Buffer
		ev := &env{stdout: &o, stderr: &e, getenv: func(string) string { return "" }, terminal: func(io.Writer) bool { return c.terminal }}
		ev.main(append([]string{"run", manifest, "--var", "origin=" + srv.URL, "--input", filepath.Join(dir, "inject.in"),
			"--state-dir", t.TempDir(), "--cache-dir", cache, "--log-level", "off"}, c.flags...))
		if !strings.Contains(o.String(), "result \x1b[31mRED") {
			t.Errorf("terminal=%v %v: the result %q, want the guest's bytes", c.terminal, c.flags, o.String())
		}
	}
	// Every other output, on a terminal; JSON forms too (their C1
	// controls are \u escapes).
	for _, args := range [][]string{
		{"graph"}, {"audit"}, {"audit", "--denied"}, {"runs"}, {"logs"}, {"logs", "last", "t1"},
		{"graph", "--format", "json"}, {"audit", "--format", "json"}, {"runs", "--format", "json"},
		{"logs", "--format", "json"},
	} {
		var o, e bytes.Buffer
		ev := &env{stdout: &o, stderr: &e, getenv: func(string) string { return "" }, terminal: func(io.Writer) bool { return true }}
		code := ev.main(append(args, "--state-dir", state))
		if code != 0 {
			t.Errorf("mandate %v: exit %d: %s", args, code, &e)
		}
		check("mandate "+strings.Join(args, " ")+" stdout", o.Bytes())
		check("mandate "+strings.Join(args, " ")+" stderr", e.Bytes())
	}
	// mandate run --format json, on a terminal.
	out.Reset()
	errOut.Reset()
	term.main([]string{"run", manifest, "--var", "origin=" + srv.URL, "--input", filepath.Join(dir, "inject.in"),
		"--state-dir", state, "--cache-dir", cache, "--log-level", "off", "--format", "json"})
	check("mandate run --format json stdout", out.Bytes())
	if !strings.Contains(out.String(), `"result_base64"`) && !strings.Contains(out.String(), `\u009b`) {
		t.Errorf("the JSON report: %s", &out)
	}
	// The kept output is in the store, the guest's bytes exactly.
	var o, e bytes.Buffer
	if code := Main([]string{"logs", "--state-dir", state, "--stream", "stdout"}, nil, &o, &e); code != 0 || !strings.Contains(o.String(), "stdout \x1b[31mRED") {
		t.Errorf("mandate logs --stream stdout to a pipe: exit %d %q %s", code, o.String(), &e)
	}
}

// TestWriteJSONEscapesC1: the JSON forms carry no raw DEL or C1 control
// (encoding/json writes those as they are), and mean the same.
func TestWriteJSONEscapesC1(t *testing.T) {
	v := map[string]string{"op": "fetch\u009b2J\x7f\x1b]8;;x\x07 ok é"}
	var b bytes.Buffer
	if err := writeJSON(&b, v); err != nil {
		t.Fatal(err)
	}
	if i, why := rawControl(b.Bytes()); i >= 0 {
		t.Fatalf("raw %s at %d: %q", why, i, b.Bytes())
	}
	var back map[string]string
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || back["op"] != v["op"] {
		t.Fatalf("round trip: %q, %v", back["op"], err)
	}
}
