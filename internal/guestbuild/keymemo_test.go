package guestbuild

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// countingGo writes a go command that logs each run to a file, then runs
// the real one; it returns the command and a function counting the runs.
func countingGo(t *testing.T) (string, func() int) {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "runs")
	bin := filepath.Join(dir, "go")
	script := "#!/bin/sh\necho run >> '" + log + "'\nexec '" + GoBin() + "' \"$@\"\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, func() int {
		b, _ := os.ReadFile(log)
		return strings.Count(string(b), "run\n")
	}
}

// tick returns once the file system's clock, as dir's files see it, has
// moved: a file written after it has a ctime none written before has.
func tick(t *testing.T, dir string) {
	t.Helper()
	p := filepath.Join(dir, ".tick")
	ctime := func() int64 {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		st, ok, err := stampPath(p)
		if err != nil || !ok {
			t.Fatal(err, ok)
		}
		return st.Ctime
	}
	for first := ctime(); ctime() == first; {
	}
	os.Remove(p)
}

// TestKeyMemo: once a guest's build is cached with a record of its key,
// building it again runs no go command; and editing a source file (to the
// same size), adding one, turning on a file a build constraint left out,
// editing a dependency's source, its go.mod, and the guest's go.sum each
// build it again, from the new sources.
func TestKeyMemo(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("key records are kept on Linux")
	}
	offline(t)
	// The files are written now: records are written as if an hour
	// later, past racyWindow.
	now = func() time.Time { return time.Now().Add(time.Hour) }
	t.Cleanup(func() { now = time.Now })
	goBin, runs := countingGo(t)
	sdk, guest := replacedSDKGuest(t, map[string]string{
		"other.go": "//go:build ignore\n\npackage main\n\nfunc init() { println(\"constraint-off\") }\n",
	})
	ctx := context.Background()
	cache := t.TempDir()
	opt := Options{CacheDir: cache, GoBin: goBin, MainEntry: true}
	build := func() ([]byte, string) {
		t.Helper()
		wasm, path, err := Build(ctx, guest, opt)
		if err != nil {
			t.Fatal(err)
		}
		if path == "" {
			t.Fatal("not cached")
		}
		return wasm, path
	}
	wasm, path := build()
	if !bytes.Contains(wasm, []byte("greeting-one")) {
		t.Fatal("first module lacks greeting-one")
	}
	// A hit: no go command, the same file.
	before := runs()
	if _, p := build(); p != path || runs() != before {
		t.Fatalf("second build: %s (first %s), %d go runs", p, path, runs()-before)
	}

	for _, c := range []struct {
		name   string
		change func()
		want   string // in the new module; "" for a change the module does not show
	}{
		{"source edited, same size", func() {
			writeFiles(t, guest, map[string]string{"main.go": strings.Replace(sdkGuestMain, "println(mandate.Greeting)", "print(mandate.Greeting)  ", 1)})
		}, ""},
		{"file added", func() {
			writeFiles(t, guest, map[string]string{"added.go": "package main\n\nfunc init() { println(\"file-added\") }\n"})
		}, "file-added"},
		{"build constraint removed", func() {
			writeFiles(t, guest, map[string]string{"other.go": "//go:build wasip1\n\npackage main\n\nfunc init() { println(\"constraint-off\") }\n"})
		}, "constraint-off"},
		{"dependency source edited, same size", func() {
			writeFiles(t, sdk, sdkFiles("greeting-two"))
		}, "greeting-two"},
		{"dependency go.mod edited", func() {
			writeFiles(t, sdk, map[string]string{"go.mod": "module " + SDKModule + "\n\ngo 1.24\n\n// edited\n"})
		}, ""},
		{"go.sum added", func() {
			writeFiles(t, guest, map[string]string{"go.sum": ""})
		}, ""},
	} {
		tick(t, filepath.Dir(guest))
		c.change()
		before := runs()
		wasm, p := build()
		if runs() == before {
			t.Errorf("%s: no go command ran", c.name)
		}
		if p == path {
			t.Errorf("%s: the cached module %s was used", c.name, p)
		}
		if c.want != "" && !bytes.Contains(wasm, []byte(c.want)) {
			t.Errorf("%s: module lacks %q", c.name, c.want)
		}
		path = p
		// And the new build is remembered in turn.
		before = runs()
		if _, p := build(); p != path || runs() != before {
			t.Errorf("%s: build after: %s (want %s), %d go runs", c.name, p, path, runs()-before)
		}
	}
}

// TestKeyMemoRacy: a record is not written while a file it would stamp
// changed within racyWindow: the next build runs go list.
func TestKeyMemoRacy(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("key records are kept on Linux")
	}
	goBin, runs := countingGo(t)
	dir := guestDir(t)
	writeGuest(t, dir, "package main\n\nfunc main() { println(1) }\n")
	opt := Options{CacheDir: t.TempDir(), GoBin: goBin}
	for i := range 2 {
		before := runs()
		if _, _, err := Build(context.Background(), dir, opt); err != nil {
			t.Fatal(err)
		}
		if runs() == before {
			t.Fatalf("build %d ran no go command: a record was written for files just written", i)
		}
	}
}
