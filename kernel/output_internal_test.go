package kernel

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// countWriter counts the bytes written to it.
type countWriter struct{ n int }

func (c *countWriter) Write(p []byte) (int, error) { c.n += len(p); return len(p), nil }

// TestOutputLogBounded: what is written to the log about a guest's stream
// is bounded by the stream's limit. 1 MiB of newlines (within the limit)
// used to become one log record each, hundreds of MiB of log.
func TestOutputLogBounded(t *testing.T) {
	const limit = 1 << 20
	var log countWriter
	logger := hclog.New(&hclog.LoggerOptions{Output: &log, Level: hclog.Info}).
		With("task", "t1", "principal", "alice", "module", "sha256:"+strings.Repeat("ab", 32))
	w := newOutputWriter("stdout", logger, limit)
	nl := bytes.Repeat([]byte("\n"), limit)
	for i := 0; i < len(nl); i += 4096 {
		w.Write(nl[i : i+4096])
	}
	w.close()
	if out := w.output(); len(out.Data) != limit || out.Truncated {
		t.Fatalf("kept %d bytes (truncated %v), want all %d", len(out.Data), out.Truncated, limit)
	}
	// The records are longer than logLineCost is charged (the fields):
	// bounded within a small factor of the limit, not ~300x it.
	if log.n > 3*limit {
		t.Fatalf("%d bytes of log for a %d-byte stream of newlines", log.n, limit)
	}
	// A normal guest's lines are all forwarded.
	var small bytes.Buffer
	w2 := newOutputWriter("stdout", hclog.New(&hclog.LoggerOptions{Output: &small}), limit)
	w2.Write([]byte("one\ntwo\n"))
	w2.close()
	if !strings.Contains(small.String(), "line=one") || !strings.Contains(small.String(), "line=two") {
		t.Fatalf("lines not forwarded: %q", small.String())
	}
}

// TestOutputWithheld: once withhold says the task carries untrusted data
// its answer refuses, its lines are kept but no longer forwarded to the
// log, and the stream is marked withheld; lastLine is what it said last.
func TestOutputWithheld(t *testing.T) {
	var log bytes.Buffer
	tainted := false
	w := newOutputWriter("stdout", hclog.New(&hclog.LoggerOptions{Output: &log}), 1<<20)
	w.withhold = func() bool { return tainted }
	w.Write([]byte("before reading\n"))
	tainted = true
	w.Write([]byte("SMUGGLED words\nmore\n\n  \n"))
	w.close()
	out := w.output()
	if !out.Withheld || string(out.Data) != "before reading\nSMUGGLED words\nmore\n\n  \n" {
		t.Errorf("kept %q, withheld %v", out.Data, out.Withheld)
	}
	if !strings.Contains(log.String(), "before reading") || strings.Contains(log.String(), "SMUGGLED") ||
		!strings.Contains(log.String(), "guest output withheld") {
		t.Errorf("the log:\n%s", &log)
	}
	if got := w.lastLine(); got != "more" {
		t.Errorf("lastLine = %q", got)
	}
	long := newOutputWriter("stderr", hclog.NewNullLogger(), 1<<20)
	long.Write([]byte("first\n" + strings.Repeat("x", 1000)))
	if got := long.lastLine(); len(got) != maxReasonLine+3 || !strings.HasSuffix(got, "...") {
		t.Errorf("a long last line: %d bytes", len(got))
	}
}
