package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/scaffold"
	"github.com/mandatevm/mandate/internal/sdkembed"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

const sdkHelp = `Usage: mandate sdk [--dir | --work] [--cache-dir DIR]

The guest SDK this binary carries, for the plain tools of a tool's folder
(go build, go vet, gopls, cargo, make), offline: unpacked once into the
cache (DIR/sdk), checked by its hash at each use.

	(no flag)  the SDK's module, version and folder, and how each
	           language's tools use it
	--dir      the folder alone (for scripts and Makefiles: the C scaffold's
	           Makefile runs it)
	--work     in a Go tool's folder (holding its go.mod): writes go.work,
	           the folder and the SDK copy, so that go build, go vet, go
	           test and gopls find the SDK without a go.sum entry or the
	           network. It never writes over a go.work.
	           In a Rust tool's folder (holding its Cargo.toml): points
	           the mandate dependency's path at the copy's rust/, when the
	           path names no crate (a pruned cache) or another copy mandate
	           unpacked (another mandate's); a path to a crate of your own
	           is left as it is. mandate new writes that path already.
	           mandate build needs none of this: it supplies the SDK by
	           itself. A C tool's Makefile needs nothing either: it asks
	           mandate sdk --dir at each make.
	--cache-dir DIR
	           the cache root (default $MANDATE_CACHE_DIR, else the user
	           cache directory + /mandate)

Examples:

	mandate sdk
	cd mytool && mandate sdk --work && go vet ./...
	cd myrusttool && mandate sdk --work && cargo build --offline --target wasm32-wasip1
	clang --target=wasm32-wasi -I"$(mandate sdk --dir)/c" -o tool.wasm main.c
`

func runSDK(e *env, args []string) int {
	c := lookupCommand("sdk")
	fs := flagSet("sdk")
	dirOnly := fs.Bool("dir", false, "")
	work := fs.Bool("work", false, "")
	cacheFlag := fs.String("cache-dir", "", "")
	pos, code, ok := e.parse(c, fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return e.usageError(c, "unexpected argument %q", pos[0])
	}
	if *dirOnly && *work {
		return e.usageError(c, "--dir and --work: one at a time")
	}
	cache, err := e.cacheDir(*cacheFlag)
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate sdk: %v\n", err)
		return exitUsage
	}
	note := func(msg string) { fmt.Fprintf(e.stderr, "mandate sdk: note: %s\n", msg) }
	dir, err := guestbuild.UnpackSDK(guestbuild.Options{CacheDir: filepath.Join(cache, "guests"), Note: note})
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate sdk: %v\n", err)
		return exitUsage
	}
	switch {
	case *dirOnly:
		fmt.Fprintln(e.stdout, dir)
		return exitOK
	case *work:
		return sdkWork(e, dir)
	}
	d, _ := sdkembed.Digest()
	fmt.Fprintf(e.stdout, "%s %s %s\n", sdkembed.Module, sdkembed.Version, d)
	fmt.Fprintf(e.stdout, "folder  %s\n", kindapi.Printable(dir))
	fmt.Fprintf(e.stdout, "go      mandate sdk --work in the tool's folder writes a go.work using it\n")
	fmt.Fprintf(e.stdout, "rust    in Cargo.toml: mandate = { path = %s }\n", scaffold.TOMLString(filepath.Join(dir, "rust")))
	fmt.Fprintf(e.stdout, "        %s\n", cargoCommand(context.Background()))
	fmt.Fprintf(e.stdout, "c       clang --target=wasm32-wasi -I%s ...\n", kindapi.Printable(filepath.Join(dir, "c")))
	return exitOK
}

// cargoCommand is the cargo command that builds a Rust tool's folder here:
// for the target of the rustc mandate build uses (wasm32-wasip1, or
// wasm32-wasi for an older rustc), naming that rustc, and the cargo beside
// it, when it is not the rustc on PATH (cargo runs the one on PATH).
func cargoCommand(ctx context.Context) string {
	tc, err := guestbuild.FindRust(ctx)
	if err != nil {
		return "cargo build --release --target " + guestbuild.RustTargetWASIP1 +
			" (no rustc here has a WASI standard library: rustup target add wasm32-wasip1, or on Debian apt-get install " +
			guestbuild.RustPackages + " for wasm32-wasi)"
	}
	cmd := "cargo build --release --target " + tc.Target
	if onPath, err := exec.LookPath("rustc"); err != nil || !sameFile(onPath, tc.Rustc) {
		cargo := "cargo"
		if c := filepath.Join(filepath.Dir(tc.Rustc), "cargo"); fileExists(c) {
			cargo = c
		}
		cmd = "RUSTC=" + kindapi.Printable(tc.Rustc) + " " + kindapi.Printable(cargo) + " build --release --target " + tc.Target
	}
	return cmd
}

func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// sdkWork is --work: for a Go tool's folder, a go.work; for a Rust tool's,
// Cargo.toml's path to the crate.
func sdkWork(e *env, sdk string) int {
	gomod, goErr := os.ReadFile("go.mod")
	cargo, cargoErr := os.ReadFile("Cargo.toml")
	if goErr != nil && cargoErr != nil {
		msg := "no go.mod or Cargo.toml here: run --work in a Go or Rust tool's folder (mandate new NAME writes one)"
		if _, err := os.Stat("Makefile"); err == nil {
			msg += "; a C tool's Makefile needs nothing: it asks mandate sdk --dir at each make"
		}
		fmt.Fprintf(e.stderr, "mandate sdk: %s\n", msg)
		return exitUsage
	}
	if cargoErr == nil {
		if code := setCargoSDK(e, cargo, sdk); code != exitOK || goErr != nil {
			return code
		}
	}
	return writeSDKWork(e, gomod, sdk)
}

// setCargoSDK points ./Cargo.toml's mandate dependency at the crate of the
// SDK copy at sdk, when its path names no crate or another copy mandate
// unpacked; a path to a crate of the person's own is left as it is.
func setCargoSDK(e *env, cargo []byte, sdk string) int {
	want := filepath.Join(sdk, "rust")
	old, ok := scaffold.CargoMandatePath(cargo)
	if !ok {
		fmt.Fprintf(e.stderr, "mandate sdk: Cargo.toml has no path for its mandate dependency: add, under [dependencies],\n\tmandate = { path = %s }\n", scaffold.TOMLString(want))
		return exitUsage
	}
	oldAbs, err := filepath.Abs(filepath.FromSlash(old))
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate sdk: %v\n", err)
		return exitUsage
	}
	switch _, statErr := os.Stat(filepath.Join(oldAbs, "Cargo.toml")); {
	case oldAbs == want:
		if statErr == nil {
			fmt.Fprintf(e.stdout, "Cargo.toml names the copy already (%s)\n", kindapi.Printable(want))
			return exitOK
		}
	case statErr == nil && !sdkembed.IsCopyName(filepath.Base(filepath.Dir(oldAbs))):
		fmt.Fprintf(e.stdout, "Cargo.toml names a mandate crate of its own (%s): left as it is; the copy mandate carries is %s\n",
			kindapi.Printable(old), kindapi.Printable(want))
		return exitOK
	}
	out, _ := scaffold.SetCargoMandatePath(cargo, want)
	if err := writeFileAtomic("Cargo.toml", out); err != nil {
		fmt.Fprintf(e.stderr, "mandate sdk: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(e.stdout, "Cargo.toml: mandate's path is %s (it was %s)\n", kindapi.Printable(want), kindapi.Printable(old))
	return exitOK
}

// writeFileAtomic replaces the file at name with data, keeping its mode.
func writeFileAtomic(name string, data []byte) error {
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(name); err == nil {
		mode = fi.Mode().Perm()
	}
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+"-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), mode)
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// writeSDKWork writes ./go.work: this folder and the SDK copy at sdk.
func writeSDKWork(e *env, gomod []byte, sdk string) int {
	// The workspace's go line: the SDK's (1.26.0), or the tool's if later.
	goVersion := "1.26.0"
	if f, err := modfile.ParseLax("go.mod", gomod, nil); err == nil && f.Go != nil && semver.Compare("v"+f.Go.Version, "v"+goVersion) > 0 {
		goVersion = f.Go.Version
	}
	// The folder's own modules (the scaffold's tooltest/ is one): a go
	// command run in them must find them in the workspace too.
	uses := "\t.\n"
	if ents, err := os.ReadDir("."); err == nil {
		for _, ent := range ents {
			if _, err := os.Stat(filepath.Join(ent.Name(), "go.mod")); ent.IsDir() && err == nil {
				uses += "\t" + strconv.Quote("./"+ent.Name()) + "\n"
			}
		}
	}
	work := fmt.Sprintf("// Written by mandate sdk --work: this tool and the guest SDK mandate\n"+
		"// carries (%s %s), so that go build, go vet and gopls work offline.\n"+
		"go %s\n\nuse (\n%s\t%s\n)\n", sdkembed.Module, sdkembed.Version, goVersion, uses, strconv.Quote(sdk))
	f, err := os.OpenFile("go.work", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		fmt.Fprintf(e.stderr, "mandate sdk: go.work exists; mandate sdk never writes over one (add the SDK's folder to it: mandate sdk --dir)\n")
		return exitUsage
	}
	if err == nil {
		_, err = f.WriteString(work)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		os.Remove("go.work")
		fmt.Fprintf(e.stderr, "mandate sdk: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(e.stdout, "wrote go.work (this folder and %s)\n", kindapi.Printable(sdk))
	if slices.Contains(strings.Fields(e.getenv("GOFLAGS")), "-mod=mod") {
		fmt.Fprintf(e.stderr, "mandate sdk: note: GOFLAGS holds -mod=mod, which the go command refuses in a workspace: "+
			"leave it out here (mandate build sets it aside by itself)\n")
	}
	return exitOK
}
