package host

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/mandatevm/mandate/sandbox"
)

// noRacyWindow records digests of files however recently they changed,
// for the test.
func noRacyWindow(t *testing.T) {
	old := racyWindow
	racyWindow = 0
	t.Cleanup(func() { racyWindow = old })
}

func needStamps(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("file stamps are read on Linux only")
	}
}

// readDigest reads path through the cache and checks the bytes it got.
func readDigest(t *testing.T, path, cache string, want []byte) string {
	t.Helper()
	wasm, d, err := readModuleFile(path, cache)
	if err != nil {
		t.Fatal(err)
	}
	if string(wasm) != string(want) {
		t.Fatalf("read %q, want %q", wasm, want)
	}
	return d
}

// TestDigestRecordIsUsed: an unchanged file's digest is the record's, not
// computed again (a record with another digest for the file's stamp is
// believed: what a record is for, and why the cache directory is private).
func TestDigestRecordIsUsed(t *testing.T) {
	needStamps(t)
	noRacyWindow(t)
	dir, cache := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "m.wasm")
	a := []byte("module bytes A")
	if err := os.WriteFile(path, a, 0o644); err != nil {
		t.Fatal(err)
	}
	if d := readDigest(t, path, cache, a); d != sandbox.Digest(a) {
		t.Fatalf("first read: digest %s, want %s", d, sandbox.Digest(a))
	}
	st := stampOf(t, path)
	abs, _ := filepath.Abs(path)
	rec := digestRecordPath(cache, abs)
	if got, ok := readDigestRecord(rec, abs, st); !ok || got != sandbox.Digest(a) {
		t.Fatalf("record: %q, %v; want %s", got, ok, sandbox.Digest(a))
	}
	fake := sandbox.Digest([]byte("fake"))
	writeDigestRecord(rec, abs, st, fake)
	if d := readDigest(t, path, cache, a); d != fake {
		t.Fatalf("unchanged file: digest %s, want the record's %s", d, fake)
	}
	// The same record for another path is not this file's.
	if _, ok := readDigestRecord(rec, abs+"x", st); ok {
		t.Error("a record was taken for another path")
	}
}

// TestDigestRecordSeesRewrite: a file rewritten in place with other bytes
// of the same size, its modification time set back (touch -d), or
// replaced by a rename with the old times, gets its new digest.
func TestDigestRecordSeesRewrite(t *testing.T) {
	needStamps(t)
	noRacyWindow(t)
	dir, cache := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "m.wasm")
	a, b, c := []byte("module bytes A"), []byte("module bytes B"), []byte("module bytes C")
	if err := os.WriteFile(path, a, 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	if d := readDigest(t, path, cache, a); d != sandbox.Digest(a) {
		t.Fatalf("A: %s", d)
	}
	if d := readDigest(t, path, cache, a); d != sandbox.Digest(a) {
		t.Fatalf("A again: %s", d)
	}

	// In place, same size, the modification time set back. The change
	// time comes from the kernel's coarse clock: a rewrite in the tick of
	// the last change would keep it (what racyWindow guards against,
	// turned off here), so the rewrite is made again until it moved.
	prev := stampOf(t, path)
	for {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, old, old); err != nil {
			t.Fatal(err)
		}
		if stampOf(t, path).ctime != prev.ctime {
			break
		}
	}
	if fi, err := os.Stat(path); err != nil || !fi.ModTime().Equal(old) || fi.Size() != int64(len(a)) {
		t.Fatalf("the rewrite did not keep size and mtime: %v %v", fi, err)
	}
	if d := readDigest(t, path, cache, b); d != sandbox.Digest(b) {
		t.Fatalf("rewritten in place: digest %s, want B's %s", d, sandbox.Digest(b))
	}

	// Replaced by another file, renamed over it, with the same times.
	tmp := filepath.Join(dir, "new.wasm")
	if err := os.WriteFile(tmp, c, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, old, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if d := readDigest(t, path, cache, c); d != sandbox.Digest(c) {
		t.Fatalf("replaced: digest %s, want C's %s", d, sandbox.Digest(c))
	}
}

// TestDigestRecordDamaged: a damaged record is ignored and rewritten.
func TestDigestRecordDamaged(t *testing.T) {
	needStamps(t)
	noRacyWindow(t)
	dir, cache := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "m.wasm")
	a := []byte("module bytes A")
	if err := os.WriteFile(path, a, 0o644); err != nil {
		t.Fatal(err)
	}
	readDigest(t, path, cache, a)
	abs, _ := filepath.Abs(path)
	rec := digestRecordPath(cache, abs)
	good, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	fake := []byte(string(good))
	// A flipped digit of the digest, the checksum left as it was.
	i := bytes.Index(fake, []byte(" sha256:"))
	if i < 0 {
		t.Fatalf("record %q has no digest", good)
	}
	fake[i+len(" sha256:")] ^= 1
	for _, damaged := range [][]byte{fake, []byte("garbage"), good[:len(good)/2], nil} {
		if err := os.WriteFile(rec, damaged, 0o600); err != nil {
			t.Fatal(err)
		}
		if d := readDigest(t, path, cache, a); d != sandbox.Digest(a) {
			t.Fatalf("record %q: digest %s, want %s", damaged, d, sandbox.Digest(a))
		}
		if got, _ := os.ReadFile(rec); string(got) != string(good) {
			t.Fatalf("record %q not rewritten: %q", damaged, got)
		}
	}
}

// TestDigestRecordRacy: a file changed within racyWindow is hashed, not
// recorded.
func TestDigestRecordRacy(t *testing.T) {
	needStamps(t)
	dir, cache := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "m.wasm")
	a := []byte("module bytes A")
	if err := os.WriteFile(path, a, 0o644); err != nil {
		t.Fatal(err)
	}
	if d := readDigest(t, path, cache, a); d != sandbox.Digest(a) {
		t.Fatalf("digest %s", d)
	}
	abs, _ := filepath.Abs(path)
	if _, err := os.Stat(digestRecordPath(cache, abs)); !os.IsNotExist(err) {
		t.Fatalf("a file changed just now was recorded: %v", err)
	}
}

// stampOf is path's stamp, as a read of it sees it.
func stampOf(t *testing.T, path string) fileStamp {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, ok := statFile(f)
	if !ok {
		t.Fatal("no stamp")
	}
	return st
}
