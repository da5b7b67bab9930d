package guestbuild

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// These tests run the real go tool on modules in t.TempDir() that depend
// only on each other (directory replaces, workspaces, vendoring), with
// GOPROXY=off so nothing is downloaded.

// writeFiles writes files (slash-separated paths relative to root).
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func offline(t *testing.T) {
	t.Setenv("GOPROXY", "off")
	t.Setenv("GOWORK", "") // discover go.work as the go tool does
}

// sdkFiles is a stand-in for the guest SDK module whose Greeting the guest
// prints.
func sdkFiles(greeting string) map[string]string {
	return map[string]string{
		"go.mod": "module " + SDKModule + "\n\ngo 1.24\n",
		"sdk.go": "package mandate\n\nconst Greeting = \"" + greeting + "\"\n",
	}
}

const sdkGuestMain = `package main

import mandate "github.com/mandatevm/mandate/guest-sdk"

func main() { println(mandate.Greeting) }
`

// buildTwice builds dir, calls change, builds again, and checks that the key,
// the cache path and the module changed, and that the module holds want1
// then want2.
func buildTwice(t *testing.T, dir string, change func(), want1, want2 string) {
	t.Helper()
	ctx := context.Background()
	cache := t.TempDir()
	key1, err := Key(ctx, dir, false, GoBin())
	if err != nil {
		t.Fatal(err)
	}
	wasm1, path1, err := Build(ctx, dir, Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if path1 == "" {
		t.Fatal("first build was not cached")
	}
	if !bytes.Contains(wasm1, []byte(want1)) {
		t.Fatalf("first module does not contain %q", want1)
	}

	change()

	key2, err := Key(ctx, dir, false, GoBin())
	if err != nil {
		t.Fatal(err)
	}
	if key2 == key1 {
		t.Fatalf("key unchanged after the change: %s", key1)
	}
	wasm2, path2, err := Build(ctx, dir, Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if path2 == path1 {
		t.Fatalf("rebuild reused the cache entry %s", path1)
	}
	if bytes.Equal(wasm1, wasm2) {
		t.Fatal("rebuilt module has the old bytes")
	}
	if !bytes.Contains(wasm2, []byte(want2)) || bytes.Contains(wasm2, []byte(want1)) {
		t.Fatalf("rebuilt module does not hold %q alone", want2)
	}
}

// A guest outside this repository whose go.mod replaces the SDK with a
// directory is rebuilt when the SDK there changes (issue 11).
func TestBuildReplacedSDKChange(t *testing.T) {
	offline(t)
	sdk, guest := replacedSDKGuest(t, nil)
	buildTwice(t, guest, func() {
		writeFiles(t, sdk, sdkFiles("greeting-two"))
	}, "greeting-one", "greeting-two")
}

// The same through a go.work workspace that uses the SDK's directory.
func TestBuildWorkspaceSDKChange(t *testing.T) {
	offline(t)
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{
		"go.work":       "go 1.24\n\nuse (\n\t./guest\n\t./sdk\n)\n",
		"guest/go.mod":  "module example.com/guest\n\ngo 1.24\n\nrequire " + SDKModule + " v0.0.0\n",
		"guest/main.go": sdkGuestMain,
	})
	writeFiles(t, filepath.Join(ws, "sdk"), sdkFiles("greeting-one"))
	buildTwice(t, filepath.Join(ws, "guest"), func() {
		writeFiles(t, filepath.Join(ws, "sdk"), sdkFiles("greeting-two"))
	}, "greeting-one", "greeting-two")
}

// A file embedded by a package of the main module outside the guest's
// directory is part of the key.
func TestBuildDependencyEmbedChange(t *testing.T) {
	offline(t)
	mod := t.TempDir()
	writeFiles(t, mod, map[string]string{
		"go.mod":         "module example.com/app\n\ngo 1.24\n",
		"asset/asset.go": "package asset\n\nimport _ \"embed\"\n\n//go:embed data.txt\nvar Data string\n",
		"asset/data.txt": "payload-one",
		"cmd/guest/main.go": "package main\n\nimport \"example.com/app/asset\"\n\n" +
			"func main() { println(asset.Data) }\n",
	})
	buildTwice(t, filepath.Join(mod, "cmd", "guest"), func() {
		writeFiles(t, mod, map[string]string{"asset/data.txt": "payload-two"})
	}, "payload-one", "payload-two")
}

// Vendored code is hashed by content, not trusted by version: editing it
// in place rebuilds.
func TestBuildVendoredChange(t *testing.T) {
	offline(t)
	_, guest := replacedSDKGuest(t, nil)
	cmd := exec.Command(GoBin(), "mod", "vendor")
	cmd.Dir = guest
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go mod vendor: %v\n%s", err, out)
	}
	vendored := filepath.Join(guest, "vendor", filepath.FromSlash(MandateModule), "guest-sdk", "sdk.go")
	if _, err := os.Stat(vendored); err != nil {
		t.Fatal(err)
	}
	buildTwice(t, guest, func() {
		writeFiles(t, filepath.Dir(vendored), map[string]string{
			"sdk.go": "package mandate\n\nconst Greeting = \"greeting-two\"\n",
		})
	}, "greeting-one", "greeting-two")
}

// A package go list cannot load (a missing import) is not keyed: Build
// returns the go tool's error naming it and caches nothing.
func TestBuildPackageErrorNotCached(t *testing.T) {
	offline(t)
	ctx := context.Background()
	dir := guestDir(t)
	writeGuest(t, dir, "package main\n\nimport _ \"example.com/missing/pkg\"\n\nfunc main() {}\n")

	_, err := Key(ctx, dir, false, GoBin())
	if !errors.Is(err, ErrUncacheable) || !strings.Contains(err.Error(), "example.com/missing/pkg") {
		t.Fatalf("Key err = %v, want ErrUncacheable naming example.com/missing/pkg", err)
	}
	cache := t.TempDir()
	wasm, path, err := Build(ctx, dir, Options{CacheDir: cache})
	if err == nil || !strings.Contains(err.Error(), "example.com/missing/pkg") {
		t.Fatalf("Build err = %v, want an error naming example.com/missing/pkg", err)
	}
	if wasm != nil || path != "" {
		t.Fatalf("Build returned a module (%d bytes, path %q) with the error", len(wasm), path)
	}
	ents, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("cache holds %s after a failed build", e.Name())
	}
}

// Outside any module, Build returns the go tool's own message (the CLI
// adds a hint when it says go.mod file not found).
func TestBuildNoModule(t *testing.T) {
	offline(t)
	dir := t.TempDir()
	writeGuest(t, dir, "package main\n\nfunc main() {}\n")
	_, path, err := Build(context.Background(), dir, Options{CacheDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "go.mod file not found") || path != "" {
		t.Fatalf("Build = %q, %v; want the go tool's go.mod file not found error", path, err)
	}
}

// GOFLAGS=-overlay makes the build read files the key cannot see: the
// module is built but not cached.
func TestBuildOverlayNotCached(t *testing.T) {
	offline(t)
	overlay := filepath.Join(t.TempDir(), "overlay.json")
	writeFiles(t, filepath.Dir(overlay), map[string]string{"overlay.json": `{"Replace":{}}`})
	t.Setenv("GOFLAGS", "-overlay="+overlay)
	ctx := context.Background()
	dir := guestDir(t)
	writeGuest(t, dir, "package main\n\nfunc main() { println(1) }\n")
	if _, err := Key(ctx, dir, false, GoBin()); !errors.Is(err, ErrUncacheable) {
		t.Fatalf("Key err = %v, want ErrUncacheable", err)
	}
	cache := t.TempDir()
	wasm, path, err := Build(ctx, dir, Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(wasm, []byte("\x00asm")) || path != "" {
		t.Fatalf("Build = %d bytes at %q, want a module and no cache path", len(wasm), path)
	}
	if ents, _ := os.ReadDir(cache); len(ents) != 0 {
		t.Fatalf("cache holds %d entries, want none", len(ents))
	}
}

// BenchmarkKey measures the cache key of a guest in this repository, the
// cost Build pays on every call, hit or miss.
func BenchmarkKey(b *testing.B) {
	ctx := context.Background()
	dir := filepath.Join("..", "..", "testdata", "guests", "bench-noop")
	goBin := GoBin()
	if _, err := Key(ctx, dir, true, goBin); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Key(ctx, dir, true, goBin); err != nil {
			b.Fatal(err)
		}
	}
}

// replacedSDKGuest writes, in a new directory, a copy of the SDK ("sdk")
// and a guest ("guest", sdkGuestMain and the files of extra) whose go.mod
// replaces the SDK with that copy.
func replacedSDKGuest(t *testing.T, extra map[string]string) (sdk, guest string) {
	t.Helper()
	root := t.TempDir()
	sdk, guest = filepath.Join(root, "sdk"), filepath.Join(root, "guest")
	writeFiles(t, sdk, sdkFiles("greeting-one"))
	files := map[string]string{
		"go.mod": "module example.com/guest\n\ngo 1.24\n\nrequire " + SDKModule + " v0.0.0\n\n" +
			"replace " + SDKModule + " => " + sdk + "\n",
		"main.go": sdkGuestMain,
	}
	for name, content := range extra {
		files[name] = content
	}
	writeFiles(t, guest, files)
	return sdk, guest
}
