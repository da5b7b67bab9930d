package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/internal/testfs"
)

// TestReadOnlyStateDir: a state directory nobody may write (a read-only
// bind mount when the test runs as root) is inspected whole: runs, graph,
// logs, audit and audit verify all work and create nothing; a run on it
// refuses to start, naming the file, and never calls it corrupted.
func TestReadOnlyStateDir(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a guest")
	}
	f := newFetchRuns(t)
	if code, stderr := f.run(); code != 0 {
		t.Fatalf("the first run: exit %d: %s", code, stderr)
	}
	testfs.ReadOnly(t, f.state)
	for _, args := range [][]string{
		{"runs"}, {"runs", "--format", "json"}, {"graph"}, {"logs"}, {"audit"}, {"audit", "verify"},
	} {
		var o, e bytes.Buffer
		if code := Main(append(args, "--state-dir", f.state), nil, &o, &e); code != 0 || o.Len() == 0 {
			t.Errorf("mandate %s on a read-only state directory: exit %d\n%s%s", strings.Join(args, " "), code, &o, &e)
		}
	}
	code, stderr := f.run()
	if code != exitUsage || strings.Contains(stderr, "corrupt") || !strings.Contains(stderr, f.state) {
		t.Errorf("a run on a read-only state directory: exit %d, stderr:\n%s", code, stderr)
	}
	t.Logf("the refused run said: %s", stderr)
	if f.requests.Load() != 1 {
		t.Errorf("%d requests reached the server, want only the first run's", f.requests.Load())
	}
}
