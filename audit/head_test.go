package audit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// TestCheckHead: what a run checks before it starts. A sound log passes;
// every kind of damage a run must not start on is refused, naming what.
func TestCheckHead(t *testing.T) {
	ctx := context.Background()
	if l, _ := open(t); l.CheckHead(ctx) != nil {
		t.Fatalf("an empty log: %v", l.CheckHead(ctx))
	}
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, path string)
		tamper  bool // a *TamperError, not a damaged file
		checked bool // checkpoint before the damage
	}{
		{"sound", func(*testing.T, string) {}, false, true},
		{"the last entry changed", func(t *testing.T, path string) {
			execPath(t, path, "UPDATE entries SET reason = 'nothing to see' WHERE idx = 9")
		}, true, true},
		{"an entry after the checkpoint changed", func(t *testing.T, path string) {
			execPath(t, path, "UPDATE entries SET reason = 'nothing to see' WHERE idx = 7")
		}, true, false},
		{"a stored hash the root depends on changed", func(t *testing.T, path string) {
			// The hash of the complete subtree of entries 0..7.
			execPath(t, path, fmt.Sprintf("UPDATE hashes SET hash = zeroblob(32) WHERE idx = %d", tlog.StoredHashIndex(3, 0)))
		}, true, true},
		{"the checkpoint's signature changed", func(t *testing.T, path string) {
			execPath(t, path, "UPDATE checkpoints SET signed = replace(signed, 'mandate audit log v1', 'mandate audit log v2')")
		}, true, true},
		{"entries deleted", func(t *testing.T, path string) {
			execPath(t, path, "DELETE FROM entries WHERE idx >= 8")
		}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, path := fill(t, 10)
			if tc.checked {
				if _, err := l.Checkpoint(); err != nil {
					t.Fatal(err)
				}
			}
			tc.damage(t, path)
			err := l.CheckHead(ctx)
			if tc.name == "sound" {
				if err != nil {
					t.Fatalf("a sound log: %v", err)
				}
				return
			}
			var te *TamperError
			if err == nil || tc.tamper != errors.As(err, &te) {
				t.Fatalf("CheckHead = %v, want a tamper error", err)
			}
		})
	}
}

// TestCheckHeadDamagedFile: a file whose pages were overwritten or which
// was cut short is refused before a run, by Open or by CheckHead, with
// the file named.
func TestCheckHeadDamagedFile(t *testing.T) {
	ctx := context.Background()
	for name, damage := range map[string]func(f *os.File, size int64){
		"pages overwritten": func(f *os.File, size int64) {
			junk := make([]byte, 8192)
			for i := range junk {
				junk[i] = byte(i*7 + 3)
			}
			f.WriteAt(junk, 4096)
		},
		"truncated": func(f *os.File, size int64) { f.Truncate(size / 2) },
	} {
		t.Run(name, func(t *testing.T) {
			l, path := fill(t, 200)
			if _, err := l.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			l.Close()
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			fi, _ := f.Stat()
			damage(f, fi.Size())
			f.Close()
			l2, err := Open(path)
			if err == nil {
				defer l2.Close()
				err = l2.CheckHead(ctx)
			}
			if err == nil {
				t.Fatalf("a %s log opened and passed CheckHead", name)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("the error does not name the file: %v", err)
			}
		})
	}
}

func execPath(t *testing.T, path, q string) {
	t.Helper()
	db := raw(t, path)
	defer db.Close()
	exec(t, db, q)
}
