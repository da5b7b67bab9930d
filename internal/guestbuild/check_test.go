package guestbuild

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/internal/wasmasm"
)

// smallModule is a module with one function: () -> ().
func smallModule() []byte {
	return wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec([]byte{0x60, 0, 0})),
		wasmasm.Section(3, wasmasm.Vec(wasmasm.Uleb(0))),
		wasmasm.Section(10, wasmasm.Vec(wasmasm.Cat(wasmasm.Uleb(2), []byte{0, 0x0b}))),
	)
}

func TestCheckModule(t *testing.T) {
	good := smallModule()
	if err := CheckModule(good); err != nil {
		t.Fatalf("a module: %v", err)
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "empty file"},
		{"text", []byte("this is not webassembly"), "magic"},
		{"version", append([]byte("\x00asm\x02\x00\x00\x00"), good[8:]...), "version 2"},
		{"no sections", wasmasm.Module(), "no code section"},
		{"truncated", good[:len(good)-2], "past the end"},
		{"unknown id", append(bytes.Clone(good), 99, 0), "unknown section id 99"},
		{"order", wasmasm.Module(wasmasm.Section(10, wasmasm.Vec()), wasmasm.Section(1, wasmasm.Vec())), "out of order"},
	} {
		err := CheckModule(c.b)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
	// Custom sections may be anywhere.
	if err := CheckModule(append(bytes.Clone(good), wasmasm.Section(0, wasmasm.Name("name"))...)); err != nil {
		t.Errorf("a custom section at the end: %v", err)
	}
}

// TestCachedRefusesEmpty: a compiler that exits 0 without writing the
// module (issue 24: go build -o a relative path, run in another
// directory) is an error, and nothing is cached under the key.
func TestCachedRefusesEmpty(t *testing.T) {
	cache := t.TempDir()
	key := strings.Repeat("ab", 32)
	rekey := func() (string, error) { return key, nil }
	rec := func() (Record, error) { return testRecord(), nil }
	_, _, err := cached(cache, "g", cache, key, rekey, func(out string) error { return nil }, rec)
	if err == nil || !strings.Contains(err.Error(), "wrote no valid module") {
		t.Fatalf("an empty build: got %v", err)
	}
	_, _, err = cached(cache, "g", cache, key, rekey, func(out string) error { return os.WriteFile(out, []byte("junk"), 0o644) }, rec)
	if err == nil {
		t.Fatal("a build that wrote junk: no error")
	}
	if ents, _ := os.ReadDir(cache); len(ents) != 0 {
		t.Errorf("cached after a failed build: %v", ents)
	}

	// An empty or invalid entry already in the cache is built again and
	// replaced.
	path := filepath.Join(cache, "g-"+key[:32]+".wasm")
	for _, bad := range [][]byte{{}, []byte("\x00asm\x01\x00\x00\x00")} {
		if err := os.WriteFile(path, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		built := 0
		b, p, err := cached(cache, "g", cache, key, rekey, func(out string) error {
			built++
			return os.WriteFile(out, smallModule(), 0o644)
		}, rec)
		want, _ := appendRecord(smallModule(), testRecord())
		if err != nil || built != 1 || p != path || !bytes.Equal(b, want) {
			t.Fatalf("entry %q: got %d builds, %s, %v", bad, built, p, err)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, want) {
			t.Errorf("entry %q not replaced: %q", bad, got)
		}
	}
}

// TestBuildRelativeCacheDir: a relative cache directory (issue 24) gives
// the module, cached where it says.
func TestBuildRelativeCacheDir(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a guest")
	}
	dir := guestDir(t)
	writeGuest(t, dir, "package main\n\nfunc main() { println(3) }\n")
	work := t.TempDir()
	t.Chdir(work)
	wasm, path, err := Build(context.Background(), dir, Options{CacheDir: "rel"})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckModule(wasm); err != nil {
		t.Fatalf("built: %v", err)
	}
	if path == "" || !strings.HasPrefix(path, filepath.Join(work, "rel")+string(filepath.Separator)) {
		t.Fatalf("cached at %q, want under %s", path, filepath.Join(work, "rel"))
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, wasm) {
		t.Errorf("the cache entry is not the module (%d bytes, want %d)", len(got), len(wasm))
	}
}

// TestCachedSourceChanged: a source that changed while the compiler ran
// (the key computed again differs) gives an error, no module and no
// cache entry: the record, read after the build, could name other bytes
// than the compiler read.
func TestCachedSourceChanged(t *testing.T) {
	cache := t.TempDir()
	key := strings.Repeat("ab", 32)
	rec := func() (Record, error) { return testRecord(), nil }
	b, p, err := cached(cache, "g", cache, key, func() (string, error) { return strings.Repeat("cd", 32), nil }, func(out string) error {
		return os.WriteFile(out, smallModule(), 0o644)
	}, rec)
	if !errors.Is(err, ErrSourceChanged) || b != nil || p != "" {
		t.Fatalf("cached with a changed key = %d bytes, %q, %v; want ErrSourceChanged", len(b), p, err)
	}
	if ents, _ := os.ReadDir(cache); len(ents) != 0 {
		t.Errorf("cached after the source changed: %v", ents)
	}
}
