package guestbuild

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeGuest(t *testing.T, dir, src string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

// guestDir returns a directory for a throwaway guest: its own module, with
// no dependencies.
func guestDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/guest\n\ngo 1.24\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestBuildCachesByContent(t *testing.T) {
	ctx := context.Background()
	cache := t.TempDir()
	dir := guestDir(t)
	writeGuest(t, dir, "package main\n\nfunc main() { println(1) }\n")

	wasm1, path1, err := Build(ctx, dir, Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(wasm1, []byte("\x00asm")) {
		t.Fatalf("output is not wasm: % x", wasm1[:8])
	}
	// A cache hit returns the same file; prove it by making it distinctive.
	if err := os.WriteFile(path1, append([]byte(nil), wasm1...), 0o644); err != nil {
		t.Fatal(err)
	}
	st1, _ := os.Stat(path1)
	_, path2, err := Build(ctx, dir, Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if path2 != path1 {
		t.Fatalf("second build path = %s, want cached %s", path2, path1)
	}
	// (A hit moves the file's time, as used now: a rewrite, through a
	// temporary file renamed over it, would be another file.)
	st2, _ := os.Stat(path2)
	if !os.SameFile(st1, st2) {
		t.Fatalf("cached file was rewritten")
	}

	// Changing a source file changes the key.
	writeGuest(t, dir, "package main\n\nfunc main() { println(2) }\n")
	_, path3, err := Build(ctx, dir, Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if path3 == path1 {
		t.Fatalf("changed source reused cache entry %s", path3)
	}
	// No temporary files are left behind.
	ents, _ := os.ReadDir(cache)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("leftover temp file %s", e.Name())
		}
	}
}

func TestBuildReactor(t *testing.T) {
	ctx := context.Background()
	dir := guestDir(t)
	writeGuest(t, dir, "// Reactor.\n//\n//mandate:reactor\npackage main\n\nfunc main() {}\n\n//go:wasmexport run\nfunc run() {}\n")
	ok, err := IsReactor(dir)
	if err != nil || !ok {
		t.Fatalf("IsReactor = %v, %v; want true, nil", ok, err)
	}
	wasm, _, err := Build(ctx, dir, Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(wasm, []byte("_initialize")) {
		t.Fatalf("reactor build does not export _initialize")
	}
}

func TestBuildErrorIncludesStderr(t *testing.T) {
	dir := guestDir(t)
	writeGuest(t, dir, "package main\n\nfunc main() { undefinedThing() }\n")
	_, _, err := Build(context.Background(), dir, Options{CacheDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "undefinedThing") {
		t.Fatalf("err = %v, want the compiler's message about undefinedThing", err)
	}
}

func TestDefaultCacheDirEnv(t *testing.T) {
	t.Setenv("MANDATE_CACHE_DIR", "/x/y")
	if got, want := DefaultCacheDir(), filepath.FromSlash("/x/y/guests"); got != want {
		t.Fatalf("DefaultCacheDir() = %q, want %q", got, want)
	}
}

// TestCachedHitIsUsed: a build served from the cache counts as used now
// (its file's time moves), so a cache capped by size keeps it.
func TestCachedHitIsUsed(t *testing.T) {
	dir := t.TempDir()
	key := strings.Repeat("ab", 32)
	builds := 0
	build := func(out string) error {
		builds++
		return os.WriteFile(out, []byte("\x00asm\x01\x00\x00\x00\x01\x04\x01\x60\x00\x00\x03\x02\x01\x00\x0a\x04\x01\x02\x00\x0b"), 0o644)
	}
	_, path, err := cached(dir, "g", dir, key, func() (string, error) { return key, nil }, build, func() (Record, error) { return testRecord(), nil })
	if err != nil || path == "" {
		t.Fatalf("%q %v", path, err)
	}
	old := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cached(dir, "g", dir, key, func() (string, error) { return key, nil }, build, func() (Record, error) { return testRecord(), nil }); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if builds != 1 || time.Since(fi.ModTime()) > time.Hour {
		t.Errorf("%d builds, the hit's file written %s ago", builds, time.Since(fi.ModTime()))
	}
}
