package guestbuild

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// needC skips the test when the C toolchain is missing, except on CI
// (CI=true), which installs it: there a missing toolchain fails.
func needC(t *testing.T) {
	t.Helper()
	if _, err := CToolchain(context.Background()); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but: %v", err)
		}
		t.Skipf("skipping C guest test: %v", err)
	}
}

// cTree makes a checkout-like tree: root/guest-sdk (the SDK module, with
// c/mandate.h from this repository plus extra), and root/guests/NAME with
// files. It returns the guest's directory and the SDK's.
func cTree(t *testing.T, files map[string]string) (dir, sdk string) {
	t.Helper()
	root := t.TempDir()
	sdk = filepath.Join(root, "guest-sdk")
	h, err := os.ReadFile("../../guest-sdk/c/mandate.h")
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(root, "guests", "g")
	writeFiles(t, root, map[string]string{
		"guest-sdk/go.mod":      "module " + SDKModule + "\n\ngo 1.24\n",
		"guest-sdk/c/mandate.h": string(h),
	})
	for n, s := range files {
		writeFiles(t, dir, map[string]string{n: s})
	}
	return dir, sdk
}

const cHello = `#include "mandate.h"
int main(void) { return mandate_set_result("hi", 2) == MANDATE_ESUCCESS ? 0 : 1; }
`

// wasmExports lists a module's exports and imports ("module.name").
func wasmExports(t *testing.T, b []byte) (exports, imports []string) {
	t.Helper()
	if !bytes.HasPrefix(b, []byte("\x00asm\x01\x00\x00\x00")) {
		t.Fatalf("not a wasm module: % x", b[:min(8, len(b))])
	}
	name := func(s []byte, i *int) string {
		n, k := binary.Uvarint(s[*i:])
		*i += k
		v := string(s[*i : *i+int(n)])
		*i += int(n)
		return v
	}
	for i := 8; i < len(b); {
		id := b[i]
		n, k := binary.Uvarint(b[i+1:])
		s := b[i+1+k : i+1+k+int(n)]
		i += 1 + k + int(n)
		j := 0
		switch id {
		case 2: // imports
			c, k := binary.Uvarint(s)
			j = k
			for range c {
				mod := name(s, &j)
				imports = append(imports, mod+"."+name(s, &j))
				kind := s[j]
				j++
				switch kind {
				case 0: // func: type index
					_, k := binary.Uvarint(s[j:])
					j += k
				default:
					t.Fatalf("import %s: kind %d", imports[len(imports)-1], kind)
				}
			}
		case 7: // exports
			c, k := binary.Uvarint(s)
			j = k
			for range c {
				exports = append(exports, name(s, &j))
				j++ // kind
				_, k := binary.Uvarint(s[j:])
				j += k
			}
		}
	}
	sort.Strings(exports)
	return exports, imports
}

func TestBuildCCommand(t *testing.T) {
	needC(t)
	ctx := context.Background()
	cache := t.TempDir()
	dir, sdk := cTree(t, map[string]string{"main.c": cHello, "util.h": "#define X 1\n", "-x.c": "int minus_x(void) { return 1; }\n"})
	wasm, path, err := Build(ctx, dir, Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if path == "" {
		t.Fatal("not cached")
	}
	exports, imports := wasmExports(t, wasm)
	if got := strings.Join(exports, " "); got != "_start memory" {
		t.Errorf("exports %q, want %q", got, "_start memory")
	}
	for _, imp := range imports {
		if !strings.HasPrefix(imp, "mandate.") && !strings.HasPrefix(imp, "wasi_snapshot_preview1.") {
			t.Errorf("import %s", imp)
		}
	}
	if !strings.Contains(strings.Join(imports, " "), "mandate.blob_create") {
		t.Errorf("imports %v: no mandate.blob_create", imports)
	}
	if bytes.Contains(wasm, []byte(".debug_info")) {
		t.Errorf("the module carries DWARF")
	}
	t.Logf("%d bytes", len(wasm))

	// Same content: the cached file. Each input changes the key.
	if _, p, err := Build(ctx, dir, Options{CacheDir: cache}); err != nil || p != path {
		t.Fatalf("rebuild: %s, %v; want cached %s", p, err, path)
	}
	for _, change := range []struct {
		what string
		do   func()
	}{
		{"a .c file", func() { writeFiles(t, dir, map[string]string{"main.c": cHello + "\n"}) }},
		{"a .h file of the guest", func() { writeFiles(t, dir, map[string]string{"util.h": "#define X 2\n"}) }},
		{"a new .c file", func() { writeFiles(t, dir, map[string]string{"more.c": "int more(void) { return 2; }\n"}) }},
		{"the SDK's header", func() {
			writeFiles(t, sdk, map[string]string{"c/mandate.h": readFile(t, filepath.Join(sdk, "c/mandate.h")) + "\n"})
		}},
		{"a new SDK file", func() { writeFiles(t, sdk, map[string]string{"c/extra/x.h": "\n"}) }},
		{"the marker (a reactor)", func() {
			writeFiles(t, dir, map[string]string{"main.c": "//mandate:reactor\n#include \"mandate.h\"\nMANDATE_ENTRY int run(void) { return 0; }\n"})
		}},
	} {
		change.do()
		_, p, err := Build(ctx, dir, Options{CacheDir: cache})
		if err != nil {
			t.Fatalf("after changing %s: %v", change.what, err)
		}
		if p == path || p == "" {
			t.Errorf("changing %s: path %q (was %q)", change.what, p, path)
		}
		path = p
	}
	// Files in subdirectories are not part of the guest.
	writeFiles(t, dir, map[string]string{"sub/broken.c": "this is not C\n"})
	if _, p, err := Build(ctx, dir, Options{CacheDir: cache}); err != nil || p != path {
		t.Errorf("a subdirectory's file: %s, %v; want %s", p, err, path)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestBuildCReproducible(t *testing.T) {
	needC(t)
	ctx := context.Background()
	dir1, _ := cTree(t, map[string]string{"main.c": cHello})
	dir2, _ := cTree(t, map[string]string{"main.c": cHello})
	w1, p1, err := Build(ctx, dir1, Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	w2, p2, err := Build(ctx, dir2, Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w1, w2) {
		t.Errorf("the same guest in two places built to different modules")
	}
	if filepath.Base(p1) != filepath.Base(p2) {
		t.Errorf("keys differ across checkouts: %s, %s", p1, p2)
	}
}

func TestBuildCReactor(t *testing.T) {
	needC(t)
	ctx := context.Background()
	dir, _ := cTree(t, map[string]string{"main.c": `#include "mandate.h"
//mandate:reactor
static int ready;
__attribute__((constructor)) static void init(void) { ready = 1; }
MANDATE_ENTRY int run(void) { return ready ? 0 : 1; }
`})
	wasm, _, err := Build(ctx, dir, Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	exports, _ := wasmExports(t, wasm)
	if got := strings.Join(exports, " "); got != "_initialize memory run" {
		t.Errorf("exports %q, want %q", got, "_initialize memory run")
	}

	// A reactor without run does not link; the error says why.
	dir, _ = cTree(t, map[string]string{"main.c": "//mandate:reactor\nint other(void) { return 0; }\n"})
	_, _, err = Build(ctx, dir, Options{CacheDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "run") {
		t.Errorf("reactor without run: %v", err)
	}

	// Options.Reactor forces it.
	dir, _ = cTree(t, map[string]string{"main.c": "#include \"mandate.h\"\nMANDATE_ENTRY int run(void) { return 0; }\n"})
	wasm, _, err = Build(ctx, dir, Options{CacheDir: t.TempDir(), Reactor: true})
	if err != nil {
		t.Fatal(err)
	}
	if exports, _ := wasmExports(t, wasm); !strings.Contains(strings.Join(exports, " "), "_initialize") {
		t.Errorf("Options.Reactor: exports %v", exports)
	}
}

func TestBuildCErrorNotCached(t *testing.T) {
	needC(t)
	cache := t.TempDir()
	dir, _ := cTree(t, map[string]string{"main.c": "int main(void) { return undefined_thing; }\n"})
	_, _, err := Build(context.Background(), dir, Options{CacheDir: cache})
	if err == nil || !strings.Contains(err.Error(), "undefined_thing") {
		t.Fatalf("error %v: want clang's stderr naming undefined_thing", err)
	}
	ents, _ := os.ReadDir(cache)
	for _, e := range ents {
		t.Errorf("cache holds %s after a failed build", e.Name())
	}
}

func TestBuildCNoCompiler(t *testing.T) {
	t.Setenv("MANDATE_CC", filepath.Join(t.TempDir(), "no-such-clang"))
	dir, _ := cTree(t, map[string]string{"main.c": cHello})
	_, _, err := Build(context.Background(), dir, Options{CacheDir: t.TempDir()})
	if !errors.Is(err, ErrNoCToolchain) {
		t.Fatalf("error %v: want ErrNoCToolchain", err)
	}
	if !strings.Contains(err.Error(), "apt-get install "+CPackages) {
		t.Errorf("error %q does not name the packages", err)
	}
}

func TestLangC(t *testing.T) {
	dir, _ := cTree(t, map[string]string{"main.c": cHello})
	if l, err := Lang(dir); err != nil || l != LangC {
		t.Errorf("Lang = %q, %v; want %q", l, err, LangC)
	}
}
