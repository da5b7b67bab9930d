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

// needRust skips the test when no rustc with a WASI std is
// installed, except under CI=true (CI installs one: .ci/run).
func needRust(t *testing.T) {
	t.Helper()
	if _, _, err := RustToolchain(context.Background()); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %v", err)
		}
		t.Skipf("skipping the Rust guest tests: %v", err)
	}
}

// rustGuest writes a Rust guest (Cargo.toml and src/main.rs) inside a
// stand-in checkout whose guest-sdk holds a copy of this repository's
// Rust SDK, so SDKDir finds it and the test may change it.
func rustGuest(t *testing.T, main string) (guest, sdk string) {
	t.Helper()
	root := t.TempDir()
	sdk = filepath.Join(root, "guest-sdk")
	writeFiles(t, sdk, map[string]string{"go.mod": "module " + SDKModule + "\n\ngo 1.24\n"})
	src := filepath.Join("..", "..", "guest-sdk", "rust")
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		writeFiles(t, filepath.Join(sdk, "rust"), map[string]string{filepath.ToSlash(rel): string(b)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	guest = filepath.Join(root, "guests", "hello")
	writeFiles(t, guest, map[string]string{
		"Cargo.toml": "[package]\nname = \"hello-guest\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n" +
			"[dependencies]\nmandate = { path = \"../../guest-sdk/rust\" }\n",
		"src/main.rs": main,
	})
	return guest, sdk
}

const rustMain = `fn main() {
    let _ = mandate::set_result(b"greeting-one");
}
`

func TestBuildRustCachesByContent(t *testing.T) {
	needRust(t)
	ctx := context.Background()
	cache := t.TempDir()
	guest, sdk := rustGuest(t, rustMain)

	wasm1, path1, err := Build(ctx, guest, Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(wasm1, []byte("\x00asm")) || path1 == "" {
		t.Fatalf("Build = %d bytes at %q, want a cached module", len(wasm1), path1)
	}
	for _, want := range []string{"greeting-one", "mandate", "task_result", "_start"} {
		if !bytes.Contains(wasm1, []byte(want)) {
			t.Errorf("module does not contain %q", want)
		}
	}
	t.Logf("hello guest: %d bytes", len(wasm1))
	if _, path, err := Build(ctx, guest, Options{CacheDir: cache}); err != nil || path != path1 {
		t.Fatalf("second build = %q, %v; want the cached %s", path, err, path1)
	}

	// A change to the guest, another file under src/, the Cargo.toml or
	// the SDK's crate is a new key.
	keys := map[string]string{}
	key := func(what string) {
		t.Helper()
		r, err := planRust(ctx, guest, Options{})
		if err != nil {
			t.Fatal(err)
		}
		k, err := r.key(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for before, k0 := range keys {
			if k0 == k {
				t.Errorf("%s: the key is the one of %s", what, before)
			}
		}
		keys[what] = k
	}
	key("the first build")
	if want := filepath.Base(guest) + "-" + keys["the first build"][:32] + ".wasm"; filepath.Base(path1) != want {
		t.Errorf("cached as %s, want %s", path1, want)
	}
	writeFiles(t, guest, map[string]string{"src/other.rs": "// unused\n"})
	key("src/other.rs")
	writeFiles(t, sdk, map[string]string{"rust/README.md": "changed\n"})
	key("the SDK")
	writeFiles(t, guest, map[string]string{"Cargo.toml": "[package]\nname = \"hello-guest\"\nedition = \"2021\"\n"})
	key("Cargo.toml")
	writeFiles(t, guest, map[string]string{"src/main.rs": strings.Replace(rustMain, "one", "two", 1)})
	key("main.rs")

	// The rebuild holds the change.
	wasm2, path2, err := Build(ctx, guest, Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if path2 == path1 || !bytes.Contains(wasm2, []byte("greeting-two")) || bytes.Contains(wasm2, []byte("greeting-one")) {
		t.Errorf("rebuild at %s (first %s) does not hold greeting-two alone", path2, path1)
	}
	ents, _ := os.ReadDir(cache)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("leftover temporary %s", e.Name())
		}
	}
}

func TestBuildRustCompileError(t *testing.T) {
	needRust(t)
	guest, _ := rustGuest(t, "fn main() { undefined_thing(); }\n")
	cache := t.TempDir()
	_, path, err := Build(context.Background(), guest, Options{CacheDir: cache})
	if err == nil || !strings.Contains(err.Error(), "undefined_thing") || path != "" {
		t.Fatalf("Build = %q, %v; want rustc's error naming undefined_thing", path, err)
	}
}

func TestReadCargo(t *testing.T) {
	for _, tc := range []struct {
		toml, name, err string
	}{
		{"[package]\nname = \"a-b\" # comment\nedition = \"2018\"\n[dependencies]\nmandate = { path = \"x\" }\n", "a-b", ""},
		{"[package]\nname = \"a#b\" # x \"y\"\n[dev-dependencies]\nproptest = \"1\"\n", "a#b", ""},
		{"[package]\nname = \"a\"\n[dependencies.mandate]\npath = \"../sdk\"\n", "a", ""},
		{"[package]\nname = \"a\"\n[dependencies]\nserde = \"1\"\n", "", `dependency "serde": mandate build builds Rust guests with rustc and the SDK alone`},
		{"[package]\nname = \"a\"\n[dependencies.serde]\nversion = \"1\"\n", "", `dependency "serde"`},
		{"[package]\nname = \"a\"\n[target.'cfg(target.os = \"wasi\")'.dependencies]\nlibc = \"0.2\"\n", "", `dependency "libc"`},
		{"[package]\nname = \"a\"\n[build-dependencies]\ncc = \"1\"\n", "", `dependency "cc"`},
		{"[package]\nname = \"a\"\nbuild = \"gen.rs\"\n", "", "build script"},
		{"[package]\nversion = \"1\"\n", "", "no [package] name"},
		{"[package]\nname = \"a\"\nedition = \"2024\"\n", "", "edition"},
	} {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{"Cargo.toml": tc.toml})
		m, err := readCargo(dir)
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) || m.name != tc.name {
			t.Errorf("readCargo(%q) = %q, %v; want %q, an error containing %q", tc.toml, m.name, err, tc.name, tc.err)
		}
	}
	// Build refuses such a guest before it looks for a compiler.
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"Cargo.toml":  "[package]\nname = \"a\"\n[dependencies]\nserde = \"1\"\n",
		"src/main.rs": "fn main() {}\n",
	})
	if _, _, err := Build(context.Background(), dir, Options{CacheDir: t.TempDir()}); err == nil ||
		!strings.Contains(err.Error(), "cargo build --release --target wasm32-wasip1") {
		t.Fatalf("Build = %v, want the notice naming cargo build", err)
	}
}

// A rustc that is missing, or has no WASI std, is ErrNoRustToolchain
// with the hint naming the packages and the PATH trap.
func TestRustToolchainMissing(t *testing.T) {
	for name, rustc := range map[string]string{
		"missing": filepath.Join(t.TempDir(), "rustc"),
		"no std":  fakeRustc(t),
	} {
		t.Setenv("MANDATE_RUSTC", rustc)
		_, _, err := RustToolchain(context.Background())
		if !errors.Is(err, ErrNoRustToolchain) || !strings.Contains(err.Error(), "apt-get install "+RustPackages) ||
			!strings.Contains(err.Error(), "rustup") {
			t.Errorf("%s: err = %v, want ErrNoRustToolchain with the hint", name, err)
		}
	}
}

// TestRustToolchainErrorOneLine: a rustc that fails says why in one line,
// not with the notes and backtrace that follow.
func TestRustToolchainErrorOneLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "rustc")
	script := "#!/bin/sh\n" +
		"echo 'error: Error loading target specification: Could not find specification for target \"wasm32-wasi\"' >&2\n" +
		"echo '  |' >&2\necho 'note: run with `RUST_BACKTRACE=1` for a backtrace' >&2\necho 'stack backtrace: 0: rust_begin_unwind' >&2\nexit 1\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MANDATE_RUSTC", p)
	_, _, err := RustToolchain(context.Background())
	if !errors.Is(err, ErrNoRustToolchain) || !strings.Contains(err.Error(), `Could not find specification for target "wasm32-wasi"`) ||
		strings.Contains(err.Error(), "backtrace") || strings.Contains(err.Error(), "\n") {
		t.Errorf("err = %v", err)
	}
}

// fakeRustc is a script that answers --print sysroot with an empty
// directory, as a rustup rustc without the wasm32-wasip1 target does.
func fakeRustc(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "rustc")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho "+dir+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRustSDKUnitTests runs the Rust SDK's own tests (its JSON parser,
// the response decoder, the request encoders) on the host, where every
// host call returns ENOTSUP: rustc --test, then the test binary.
func TestRustSDKUnitTests(t *testing.T) {
	needRust(t)
	rustc, _, _ := RustToolchain(context.Background())
	bin := filepath.Join(t.TempDir(), "sdk-tests")
	src := filepath.Join("..", "..", "guest-sdk", "rust", "src", "lib.rs")
	ctx := context.Background()
	if err := run(ctx, ".", rustEnv(rustc), nil, rustc, "--edition", "2021", "--test", "--crate-name", "mandate", src, "-o", bin); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, bin).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("%s", bytes.TrimSpace(out))
}
