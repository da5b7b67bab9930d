package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cacheWith writes a cache root with files of 1 KiB in wazero/, each
// written ages[i] ago, and returns the root and the files' paths.
func cacheWith(t *testing.T, ages ...time.Duration) (string, []string) {
	t.Helper()
	root := t.TempDir()
	var paths []string
	for i, age := range ages {
		p := filepath.Join(root, "wazero", "m"+string(rune('a'+i)))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, bytes.Repeat([]byte{'x'}, 1024), 0o644); err != nil {
			t.Fatal(err)
		}
		when := time.Now().Add(-age)
		if err := os.Chtimes(p, when, when); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return root, paths
}

func exist(paths []string) string {
	var b strings.Builder
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			b.WriteByte('1')
		} else {
			b.WriteByte('0')
		}
	}
	return b.String()
}

// TestCachePruneMaxSize: --max-size removes the least recently written
// files until the rest fits.
func TestCachePruneMaxSize(t *testing.T) {
	root, paths := cacheWith(t, 3*time.Hour, 1*time.Hour, 5*time.Hour, 2*time.Hour)
	var o, e bytes.Buffer
	if code := Main([]string{"cache", "prune", "--cache-dir", root, "--max-size", "2KiB"}, nil, &o, &e); code != 0 {
		t.Fatalf("exit %d: %s", code, &e)
	}
	if got := exist(paths); got != "0101" {
		t.Errorf("files left %s, want the two written last (0101); %s", got, &o)
	}
	if code := Main([]string{"cache", "prune", "--cache-dir", root, "--max-size", "2 parsecs"}, nil, &o, &e); code != 2 || !strings.Contains(e.String(), "unknown unit") {
		t.Errorf("a bad size: exit %d: %s", code, &e)
	}
}

// TestCacheCap: past MANDATE_CACHE_MAX, the cache is pruned to three
// quarters of it, the least recently written first, never a file of the
// last day, once an hour at most; "off" turns it off.
func TestCacheCap(t *testing.T) {
	capWith := func(root, max string) string {
		var errb bytes.Buffer
		e := &env{stderr: &errb, getenv: func(k string) string {
			if k == "MANDATE_CACHE_MAX" {
				return max
			}
			return ""
		}}
		e.capCache(root)
		return errb.String()
	}
	day := 24 * time.Hour
	root, paths := cacheWith(t, 3*day, 2*day, 5*day, time.Hour, 4*day)
	if said := capWith(root, "off"); said != "" || exist(paths) != "11111" {
		t.Fatalf("off: %q, files %s", said, exist(paths))
	}
	// 5 KiB over a cap of 4 KiB: pruned to 3 KiB, the oldest first.
	said := capWith(root, "4KiB")
	if got := exist(paths); got != "11010" || !strings.Contains(said, "removed the 2 least recently written files (2.0 KiB)") {
		t.Errorf("files left %s (want 11010); said %q", got, said)
	}
	// Checked at most once an hour.
	if said := capWith(root, "1KiB"); said != "" || exist(paths) != "11010" {
		t.Errorf("a second check within the hour: %q, files %s", said, exist(paths))
	}
	// Never a file written in the last day, whatever the cap.
	os.Remove(filepath.Join(root, capStamp))
	capWith(root, "1B")
	if got := exist(paths); got != "00010" {
		t.Errorf("files left %s, want only the one of the last hour (00010)", got)
	}
	if said := capWith(root, "lots"); !strings.Contains(said, "MANDATE_CACHE_MAX") {
		t.Errorf("a bad cap: %q", said)
	}
}
