package tools

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/testbin"
)

// plainEnv is what TestPlainTools runs its commands in: a tool's folder
// outside the checkout, no network for the go command (an empty module
// cache), no crates registry for cargo (an empty CARGO_HOME), the mandate
// under test first on PATH (as "mandate": the C Makefile runs it), and a
// cache of its own (the test removes the SDK's copy from it).
type plainEnv struct {
	t       *testing.T
	work    string
	mandate string // the mandate under test, as work/bin/mandate
	env     []string
}

func newPlainEnv(t *testing.T) *plainEnv {
	bin := testbin.Mandate(t)
	work := t.TempDir()
	binDir := filepath.Join(work, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(binDir, "mandate")); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GOPROXY=off", "GOMODCACHE="+filepath.Join(work, "modcache"), "GOFLAGS=-modcacherw", "GOWORK=",
		"CARGO_HOME="+filepath.Join(work, "cargo-home"),
		"MANDATE_CACHE_DIR="+filepath.Join(work, "cache"))
	return &plainEnv{t: t, work: work, mandate: filepath.Join(binDir, "mandate"), env: env}
}

// run runs prog in dir (relative to the work folder) and returns its
// combined output, failing the test when it fails.
func (p *plainEnv) run(dir, prog string, args ...string) string {
	p.t.Helper()
	out, err := p.try(dir, nil, prog, args...)
	if err != nil {
		p.t.Fatalf("in %s: %s %s: %v\n%s", dir, prog, strings.Join(args, " "), err, out)
	}
	return out
}

// try runs prog in dir with extra environment variables ("mandate" is the
// mandate under test).
func (p *plainEnv) try(dir string, extra []string, prog string, args ...string) (string, error) {
	if prog == "mandate" {
		prog = p.mandate
	}
	// Each step's own hang guard, under go test's: a hang names the step
	// (as TestNewEveryLangAndCap's do); not a bound on how long it takes.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Dir = filepath.Join(p.work, dir)
	cmd.Env = append(append([]string(nil), p.env...), extra...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("not done in 10 minutes: %w", ctx.Err())
	}
	return string(out), err
}

// need skips a part of the test whose toolchain is missing, except under
// CI=true (.ci/run installs it).
func need(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI installs %s: %v", what, err)
	}
	t.Skipf("no %s: %v", what, err)
}

// isWasm fails the test unless the file at path is a WebAssembly module.
func isWasm(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(b, []byte("\x00asm")) {
		t.Fatalf("%s: %d bytes, %v; want a WebAssembly module", path, len(b), err)
	}
}

// TestPlainTools writes a tool of each language with mandate new, outside
// the checkout, and builds it with the language's own tools, offline:
// go vet and go build (Go, through the go.work mandate sdk --work writes),
// cargo build --offline (Rust, Cargo.toml naming the crate mandate carries),
// make (C, the Makefile asking mandate sdk --dir); mandate build builds the
// same folder beside them.
func TestPlainTools(t *testing.T) {
	if testing.Short() {
		t.Skip("builds three tools with go, cargo and make")
	}
	t.Run("go", func(t *testing.T) {
		goBin, err := exec.LookPath("go")
		need(t, "the go command", err)
		p := newPlainEnv(t)
		p.run(".", "mandate", "new", "gotool")
		// Without the go.work, the go command cannot find the SDK offline.
		if out, err := p.try("gotool", nil, goBin, "vet", "./..."); err == nil {
			t.Errorf("go vet without go.work passed (it cannot fetch the SDK): %s", out)
		}
		p.run("gotool", "mandate", "sdk", "--work")
		p.run("gotool", goBin, "vet", "./...")
		p.run("gotool", goBin, "build", "-o", "plain.wasm", ".")
		// GOOS and GOARCH as extra variables: later ones win.
		if out, err := p.try("gotool", []string{"GOOS=wasip1", "GOARCH=wasm"}, goBin, "build", "-o", "plain.wasm", "."); err != nil {
			t.Fatalf("go build for wasip1: %v\n%s", err, out)
		}
		isWasm(t, filepath.Join(p.work, "gotool", "plain.wasm"))
		if out := p.run("gotool", "mandate", "build", "."); !strings.Contains(out, "sha256:") {
			t.Errorf("mandate build: %s", out)
		}
		// A -mod=mod of the person's: set aside for mandate build, with a note.
		out, err := p.try("gotool", []string{"GOFLAGS=-modcacherw -mod=mod"}, "mandate", "build", ".")
		if err != nil || !strings.Contains(out, "-mod=mod is set aside") {
			t.Errorf("mandate build with GOFLAGS=-mod=mod: %v\n%s", err, out)
		}
	})

	t.Run("rust", func(t *testing.T) {
		tc, err := guestbuild.FindRust(context.Background())
		need(t, "a rustc with a WASI standard library", err)
		cargo, err := cargoFor(tc.Rustc)
		need(t, "cargo", err)
		p := newPlainEnv(t)
		p.run(".", "mandate", "new", "rusttool", "--lang", "rust")
		// cargo runs the rustc beside it, as RUSTC says (a rustup rustc
		// first on PATH may have no WASI std).
		rustc := []string{"RUSTC=" + tc.Rustc}
		build := func() (string, error) {
			return p.try("rusttool", rustc, cargo, "build", "--offline", "--release", "--target", tc.Target)
		}
		if out, err := build(); err != nil {
			t.Fatalf("cargo build --offline --release --target %s: %v\n%s", tc.Target, err, out)
		}
		wasm := filepath.Join(p.work, "rusttool", "target", tc.Target, "release", "rusttool.wasm")
		isWasm(t, wasm)
		if out := p.run("rusttool", "mandate", "build", "."); !strings.Contains(out, "sha256:") {
			t.Errorf("mandate build: %s", out)
		}

		// The cache pruned: cargo cannot read the crate; mandate sdk
		// --work unpacks it again where Cargo.toml says.
		removeTree(t, filepath.Join(p.work, "cache", "guests", "sdk"))
		if out, err := build(); err == nil {
			t.Fatalf("cargo build with the copy removed passed:\n%s", out)
		}
		if out := p.run("rusttool", "mandate", "sdk", "--work"); !strings.Contains(out, "names the copy already") {
			t.Errorf("mandate sdk --work after the prune: %s", out)
		}
		if out, err := build(); err != nil {
			t.Fatalf("cargo build after mandate sdk --work: %v\n%s", err, out)
		}

		// Another mandate's copy, gone: --work points Cargo.toml at this one.
		toml := filepath.Join(p.work, "rusttool", "Cargo.toml")
		b, err := os.ReadFile(toml)
		if err != nil {
			t.Fatal(err)
		}
		dir := p.run(".", "mandate", "sdk", "--dir")
		stale := strings.Replace(string(b), filepath.Base(strings.TrimSpace(dir)), "guest-sdk-000000000000000000000000", 1)
		if stale == string(b) {
			t.Fatalf("Cargo.toml does not name %s:\n%s", dir, b)
		}
		if err := os.WriteFile(toml, []byte(stale), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := build(); err == nil {
			t.Fatalf("cargo build with a stale path passed:\n%s", out)
		}
		if out := p.run("rusttool", "mandate", "sdk", "--work"); !strings.Contains(out, "mandate's path is") {
			t.Errorf("mandate sdk --work on a stale path: %s", out)
		}
		if out, err := build(); err != nil {
			t.Fatalf("cargo build after mandate sdk --work: %v\n%s", err, out)
		}
	})

	t.Run("c", func(t *testing.T) {
		_, err := guestbuild.CToolchain(context.Background())
		need(t, "clang for wasm32-wasi", err)
		makeBin, err := exec.LookPath("make")
		need(t, "make", err)
		p := newPlainEnv(t)
		p.run(".", "mandate", "new", "ctool", "--lang", "c")
		p.run("ctool", makeBin)
		isWasm(t, filepath.Join(p.work, "ctool", "ctool.wasm"))
		if out := p.run("ctool", "mandate", "build", "."); !strings.Contains(out, "sha256:") {
			t.Errorf("mandate build: %s", out)
		}
	})
}

// cargoFor is the cargo that goes with rustc: the one in its sysroot's bin
// (a rustup toolchain's, not rustup's proxy), beside it, or on PATH.
func cargoFor(rustc string) (string, error) {
	cands := []string{filepath.Join(filepath.Dir(rustc), "cargo")}
	if out, err := exec.Command(rustc, "--print", "sysroot").Output(); err == nil {
		cands = append([]string{filepath.Join(strings.TrimSpace(string(out)), "bin", "cargo")}, cands...)
	}
	for _, c := range cands {
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() {
			return c, nil
		}
	}
	return exec.LookPath("cargo")
}

// removeTree removes a tree whose files and folders may be read-only (the
// SDK's copy is).
func removeTree(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
}
