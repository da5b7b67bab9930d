// Package guestbuild builds a Go guest (a main package) to WebAssembly
// (GOOS=wasip1 GOARCH=wasm) and keeps the result in a content-addressed cache,
// so tests and the CLI rebuild a guest only when something it depends on
// changed.
//
//	wasm, path, err := guestbuild.Build(ctx, "testdata/guests/hello", guestbuild.Options{})
//	if err != nil {
//		log.Fatal(err) // includes the go tool's stderr
//	}
//	fmt.Println(len(wasm), path) // path is the cached .wasm file ("" if not cached)
//
// # Reactors
//
// A guest is a reactor (built with -buildmode=c-shared, entered through
// _initialize and an exported function) when any of its non-test .go files
// contains a line that is exactly the marker comment
//
//	//mandate:reactor
//
// IsReactor reports it, and Build uses it when Options.Reactor is false. The
// marker is explicit on purpose: a
// //go:wasmexport directive alone does not make a package a reactor, since
// commands may export functions too.
//
// # Commands started from a snapshot
//
// With Options.MainEntry, a Go command (a main package that is not a
// reactor) is built as a reactor whose entry runs main: -buildmode=c-shared
// (the module exports _initialize: the Go runtime's start and every
// package's init) and one more file in package main, given to the go tool
// by -overlay and kept in the cache directory (the guest's folder is never
// written), that exports MainEntryExport:
//
//	//go:wasmexport run
//	func _mandateMainEntry() { main() }
//
// MainEntryExport is sandbox.DefaultEntry, the entry every engine runs
// when a task names none, so such a module runs as a command did
// everywhere (the kernel, sessions, a fleet node) with no change to any of
// them, and its tasks start from the engine's snapshot of _initialize when
// its inits made no host call and wrote no output (a Go command's package
// inits usually do neither). What main does behaves as in a command: a
// return is exit code 0, os.Exit(n) is proc_exit(n), an unrecovered panic
// or a deadlock is the runtime's exit code 2; argv[0] is the snapshot's
// ("task") rather than the task's name.
//
// The added file also clears the "crash" bit that a c-shared runtime adds
// to GOTRACEBACK (so a panic exits 2 rather than trapping), through a
// linkname directive the build allows with -ldflags=-checklinkname=0; a panic in
// a package init, before main's, still traps. A package that already
// exports a function named MainEntryExport or has a file named
// MainEntryFile, a GOFLAGS with -ldflags or -overlay (which the build's
// own would replace), or a build with the file that fails (a toolchain
// whose runtime lacks those names) is built as a plain command. The key
// of such a build covers the added file and flags.
//
// # Reproducible modules and their record
//
// The same source, guest SDK and toolchain give the same module, byte for
// byte, whatever folder the guest and the SDK are in and whoever builds
// it (HOME, GOCACHE, the module cache and the cache directory do not
// matter):
//   - Go: -trimpath -buildvcs=false, and -ldflags=-buildid= (the Go build
//     ID, derived from more than the source, is left out; a GOFLAGS with
//     -ldflags keeps the person's flags and so the build ID); the added
//     file of a main entry is given by -overlay, whose path does not reach
//     the module;
//   - Rust: rustc alone, run in the guest's folder on src/main.rs (a
//     relative name), the SDK's folder remapped to "mandate"
//     (--remap-path-prefix), -C strip=debuginfo; the crates' hashes
//     depend on their names and sources, not on folders (no -C metadata);
//   - C: clang on ./NAME.c in the guest's folder, no -g, the SDK's
//     include folder remapped (-ffile-prefix-map), -Wl,--strip-debug.
//
// What is not covered: another toolchain (another go, rustc, clang or
// wasi-libc version) builds other bytes, and the record says which.
//
// Every module Build returns ends with a custom section named
// SectionName, "mandate.build", holding a Record as JSON: the language,
// the toolchain's versions, the SDK's version and digest, the mode and
// the flags (with $SDK and $OVERLAY for folders of this machine), the
// digest of each source file, named relative to the guest's folder, and
// the git commit of the checkout the folder is in (read from .git, no git
// process). The section is covered by the module's digest; the same
// files at another commit, or outside a checkout, differ in that field
// alone (StripRecord gives the module without it). ReadRecord reads the
// section of any module, Diff says how two records differ, file by file,
// and Rebuild builds a folder again as a record says, with this
// builder's own flags (never the record's).
//
// The source of a Go guest is the files its key hashes by content (see
// keyStamped): the .go and embedded files of the build's packages that
// are not from the module cache, the standard library or the SDK, and
// their modules' go.mod and go.sum (a module root above the folder gives
// "../go.mod"), and the workspace's go.work; of a Rust guest, Cargo.toml,
// Cargo.lock and every file under src/; of a C guest, its .c and .h
// files. Each language's key covers every field of the record but the
// commit, which is read again whenever a cached module is used (the
// cached file is rewritten when it changed): a cached build of an
// unchanged Go guest still runs no go command.
//
// # Cache key
//
// The key is the SHA-256 over what the build reads, as the go tool itself
// reports it: Key runs
//
//	go list -e -deps -json=... [build flags] .
//
// in the guest directory with the build's environment (GOOS=wasip1
// GOARCH=wasm CGO_ENABLED=0, the caller's GOFLAGS, GOWORK and so on, and the
// build's own flags: -trimpath -buildvcs=false, plus -buildmode=c-shared for
// a reactor), and "go env" there for the toolchain. Hashed are:
//   - the go tool's version, GOFLAGS, GOEXPERIMENT, GOWASM and GOROOT, as
//     "go env" reports them in the guest directory (so a toolchain line in
//     go.mod and go env -w settings count), and the build mode;
//   - the import path of every package in the build, standard library
//     included (the standard library's files are pinned by the go version);
//   - for a package of a module in the module cache (a version, not replaced
//     by a directory, and its directory under GOMODCACHE): the module's path,
//     version, Sum and GoModSum, and those of its replacement module if any;
//     the go tool checks those bytes against go.sum;
//   - for every other package (the main module, a module replaced by a
//     directory, a workspace module, vendored code): its module's path,
//     version and replacement, and the name and content of every file the
//     package's build reads as go list lists them (GoFiles, CgoFiles,
//     SFiles, HFiles, SysoFiles, EmbedFiles and the other source lists; not
//     IgnoredGoFiles or test files), and its module's go.mod and go.sum (the
//     sum file next to the go.mod that go list reports, so -modfile counts)
//     and vendor/modules.txt;
//   - go.work and go.work.sum when the build is in workspace mode, and the
//     workspace's vendor/modules.txt;
//   - default.pgo in the main package's directory (the default -pgo=auto
//     reads it), or the profile GOFLAGS names with -pgo=FILE.
//
// A missing file is hashed as absent. The build is not cached at all (Key
// returns an error wrapping ErrUncacheable, and Build builds afresh and
// returns an empty path, or the build's error) when go env or go list
// fails, go list reports an error for any package or module (Error,
// DepsErrors, Incomplete), or GOFLAGS has -overlay, -toolexec or -pkgdir,
// which make the build read what the key cannot see. After a build, Build
// computes the key again: when it changed, a file was edited during the
// build, and Build returns ErrSourceChanged with no module (which would
// carry a record of other files than its compiler read) and caches
// nothing, so a file edited during the build cannot leave a module under
// a key it was not built from.
//
// The cache directory is Options.CacheDir, or $MANDATE_CACHE_DIR/guests when
// that variable is set, or os.UserCacheDir()/mandate/guests; a relative one
// is taken from the current directory. Entries are
// written to a temporary file and renamed into place, so concurrent builds
// of the same guest (for instance parallel test binaries) are safe. What a
// build wrote must be a module (CheckModule): an empty or invalid output is
// an error and is never cached, and an entry in the cache that is not a
// module is ignored, built again and replaced.
//
// # Without go list
//
// Build (not Key) remembers, in CacheDir/keys, the key of a Go guest it
// cached with the stamps (device, inode, size, mtime, ctime) of every path
// that key depends on: each local package's directory, its files and the
// directories up to its module's root, the modules' go.mod, go.sum and
// vendor/modules.txt, go.work and go.mod in the guest's directory and
// every one above, the workspace files, the go env file, the go command.
// The record is found by the guest's directory, the build mode, the go
// command and the go tool's environment variables; while every stamp in it
// holds, the key is the record's and no go command runs (a cached build of
// an unchanged guest costs one stat per path, tens of them). A record is
// not written when a stamp changed within two seconds before the key was
// computed, as git's index does (keymemo.go). Linux only; elsewhere go
// list runs every time.
package guestbuild

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// MandateModule is the module path of this repository; guests import its
// guest-sdk.
const MandateModule = "github.com/mandatevm/mandate"

// ReactorMarker is the comment line that marks a guest as a reactor.
const ReactorMarker = "//mandate:reactor"

// ErrUncacheable is wrapped by Key's error when the build cannot be keyed
// (see the package doc); Build then builds without the cache.
var ErrUncacheable = errors.New("build not cacheable")

// ErrSourceChanged is returned when a guest's source changed while it was
// being built: the module and its record could name different bytes, so
// neither is returned; building again gives a consistent pair.
var ErrSourceChanged = errors.New("the source changed during the build; build again")

// keyVersion changes whenever what the key covers, or what a build writes
// into the record it covers, changes.
const keyVersion = "guestbuild v4" // v3: the module carries its record; v4: GOFLAGS filtered

// Options configure Build. The zero value is usable.
type Options struct {
	// CacheDir holds built modules. Empty means DefaultCacheDir().
	CacheDir string
	// Reactor forces -buildmode=c-shared. When false, the guest is a
	// reactor only if it carries ReactorMarker (see IsReactor).
	Reactor bool
	// GoBin is the go command. Empty means "go" from PATH, else
	// $GOROOT/bin/go, else runtime.GOROOT()/bin/go.
	GoBin string
	// MainEntry builds a Go command (a guest that is not a reactor) as a
	// reactor whose export MainEntryExport runs main, so that its tasks
	// can start from a snapshot (see "Commands started from a snapshot"
	// in the package documentation). mandate build sets it.
	MainEntry bool
	// Stderr, when set, also receives the go tool's stderr.
	Stderr io.Writer
	// Note, when set, is told what a person building should know: that
	// the SDK embedded in this binary was used, or that a changed copy
	// of it was replaced.
	Note func(msg string)
}

// DefaultCacheDir returns $MANDATE_CACHE_DIR/guests when that variable is
// set, else os.UserCacheDir()/mandate/guests, else a directory under
// os.TempDir().
func DefaultCacheDir() string {
	if d := os.Getenv("MANDATE_CACHE_DIR"); d != "" {
		return filepath.Join(d, "guests")
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "mandate", "guests")
	}
	return filepath.Join(os.TempDir(), "mandate", "guests")
}

// GoBin returns the go command Build uses when Options.GoBin is empty.
func GoBin() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if r := os.Getenv("GOROOT"); r != "" {
		return filepath.Join(r, "bin", "go")
	}
	// The last resort when go is neither on PATH nor named by GOROOT: the
	// toolchain this binary was built with, if it is still there.
	//lint:ignore SA1019 the fallback after PATH and $GOROOT, which the deprecation notice recommends and GoBin tries first
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// goTarget is the environment that makes the go tool build for WASI.
var goTarget = []string{"GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0"}

// buildEnv is the environment of the build and of the go list and go env
// runs that key it.
func buildEnv(extra ...string) []string {
	return append(append(os.Environ(), goTarget...), extra...)
}

// buildFlags are the build flags Build passes to go build, and Key to go
// list. -buildvcs=false keeps version control state, which the key does not
// cover, out of the module.
func buildFlags(reactor bool) []string {
	f := []string{"-trimpath", "-buildvcs=false"}
	if reactor {
		f = append(f, "-buildmode=c-shared")
	}
	return f
}

// noBuildID is the linker flag that leaves the Go build ID out of the
// module: it is derived from the inputs, but from more of them than the
// source, the SDK and the toolchain (a reproducible module has none).
const noBuildID = "-buildid="

// goflagsLDFlags reports whether GOFLAGS sets -ldflags, which a build's own
// -ldflags would replace: a command is then linked with the person's (and
// the build ID they leave); a main entry is not added (canAddMainEntry).
func goflagsLDFlags() bool {
	for _, f := range strings.Fields(os.Getenv("GOFLAGS")) {
		if strings.HasPrefix(strings.TrimLeft(f, "-"), "ldflags") {
			return true
		}
	}
	return false
}

// goFlags are the go build flags of a Go guest as its record names them:
// the environment the build sets, buildFlags, and the -overlay (written
// $OVERLAY: a file in the cache, MainEntryFile's) and -ldflags it adds.
func goFlags(reactor, mainEntry bool) []string {
	f := append(slices.Clone(goTarget), buildFlags(reactor || mainEntry)...)
	switch {
	case mainEntry:
		f = append(f, "-overlay=$OVERLAY", "-ldflags="+mainEntryLDFlags+" "+noBuildID)
	case !goflagsLDFlags():
		f = append(f, "-ldflags="+noBuildID)
	}
	return f
}

// goBuildArgs are the go build flags of a record's flags (goFlags): the
// environment left out (buildEnv sets it), $OVERLAY replaced by the
// overlay file. The record names what the build runs.
func goBuildArgs(flags []string, overlay string) []string {
	var args []string
	for _, f := range flags {
		if !strings.HasPrefix(f, "-") {
			continue // GOOS=wasip1 and the like
		}
		args = append(args, strings.ReplaceAll(f, "$OVERLAY", overlay))
	}
	return args
}

// Build builds the guest in dir, or returns the cached result: a Go main
// package for GOOS=wasip1 GOARCH=wasm, or a C or Rust guest (see Lang). It
// returns the module's bytes and the path of the cached file; the path is
// empty when the module was built but not cached (see the package doc). A
// failed build's error includes the compiler's stderr.
func Build(ctx context.Context, dir string, opt Options) (wasm []byte, path string, err error) {
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, "", err
	}
	cacheDir := opt.CacheDir
	if cacheDir == "" {
		cacheDir = DefaultCacheDir()
	}
	// Absolute: the compilers run in the guest's directory, and a relative
	// output path there is another file than the one read back here.
	if cacheDir, err = filepath.Abs(cacheDir); err != nil {
		return nil, "", err
	}
	opt.CacheDir = cacheDir
	lang, err := Lang(dir)
	if err != nil {
		return nil, "", err
	}
	switch lang {
	case LangC:
		return buildC(ctx, dir, opt, cacheDir)
	case LangRust:
		return buildRust(ctx, dir, opt, cacheDir)
	}
	return buildGo(ctx, dir, opt, cacheDir)
}

// buildGo is Build for a Go guest.
func buildGo(ctx context.Context, dir string, opt Options, cacheDir string) ([]byte, string, error) {
	since := now()
	goBin := opt.GoBin
	if goBin == "" {
		goBin = GoBin()
	}
	// A record of the last key that still holds: no go command runs
	// (keymemo.go).
	memo := memoPath(cacheDir, dir, opt.Reactor, opt.MainEntry, goBin)
	if k, ok := memoKey(memo); ok {
		path := filepath.Join(cacheDir, filepath.Base(dir)+"-"+k[:32]+".wasm")
		if b, ok := cacheHit(path, dir); ok {
			return b, path, nil
		}
	}
	reactor := opt.Reactor
	if !reactor {
		var err error
		if reactor, err = IsReactor(dir); err != nil {
			return nil, "", err
		}
	}
	mainEntry := false
	if !reactor && opt.MainEntry {
		var err error
		if mainEntry, err = canAddMainEntry(dir); err != nil {
			return nil, "", err
		}
	}
	bEnv, err := sdkEnv(ctx, dir, goBin, opt, cacheDir)
	if err != nil {
		return nil, "", err
	}
	st := newStamper()
	k, src, err := keyStamped(ctx, dir, reactor, mainEntry, goBin, bEnv, st, cacheDir)
	if err != nil && !errors.Is(err, ErrUncacheable) {
		return nil, "", err
	}
	if err != nil {
		// When go list reported an error, the build reports it too (it
		// reads the same packages); its message is the one to return.
		k = ""
	}
	rekey := func() (string, error) {
		k, _, err := keyStamped(ctx, dir, reactor, mainEntry, goBin, bEnv, nil, cacheDir)
		return k, err
	}
	flags := goFlags(reactor, mainEntry)
	record := func() (Record, error) {
		if src == nil {
			// Not keyed (go list failed where the build did not): the
			// source is the folder's files.
			var err error
			if src, err = dirSource(ctx, dir, goBin, bEnv); err != nil {
				return Record{}, err
			}
		}
		r := Record{Lang: LangGo, Toolchain: src.toolchain, SDK: src.sdk, Mode: ModeCommand, Flags: flags, Source: sourceRecord(src.files)}
		switch {
		case reactor:
			r.Mode = ModeReactor
		case mainEntry:
			r.Mode = ModeMainEntry
		}
		if src.goflags != "" {
			r.Flags = append(append([]string(nil), flags...), "GOFLAGS="+src.goflags)
		}
		return r, nil
	}
	wasm, path, err := cached(cacheDir, filepath.Base(dir), dir, k, rekey, func(out string) error {
		ov := ""
		if mainEntry {
			var err error
			if ov, err = mainEntryOverlay(cacheDir, dir); err != nil {
				return err
			}
		}
		args := append(append([]string{"build", "-o", out}, goBuildArgs(flags, ov)...), ".")
		return run(ctx, dir, bEnv, opt.Stderr, goBin, args...)
	}, record)
	if err != nil && mainEntry && ctx.Err() == nil && !errors.Is(err, ErrSourceChanged) {
		// What the added file needs may be missing from this toolchain
		// (a later Go's runtime), or the package may clash with it: the
		// command is built as it is, and a failure is its own.
		opt.MainEntry = false
		return buildGo(ctx, dir, opt, cacheDir)
	}
	if err == nil && path != "" && st.ok {
		writeMemo(memo, k, st.stamps, since)
	}
	return wasm, path, err
}

// cached returns the module cached under key in cacheDir, or builds it
// with build (which writes the module to the file it is given), adds the
// section of the record that record returns (recordbuild.go), and caches
// it under key when rekey, asked after the build, still gives key: if a
// file changed while the build ran, the key no longer says which version
// went in. An empty key means the build is not cacheable: it is built and
// the path returned is empty. dir is the guest's folder, whose VCS
// revision the record gets.
func cached(cacheDir, name, dir, key string, rekey func() (string, error), build func(out string) error, record func() (Record, error)) ([]byte, string, error) {
	var path string
	if key != "" {
		path = filepath.Join(cacheDir, name+"-"+key[:32]+".wasm")
		if b, ok := cacheHit(path, dir); ok {
			return b, path, nil
		}
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, "", fmt.Errorf("guestbuild: %w", err)
	}
	tmp, err := os.CreateTemp(cacheDir, ".build-*.wasm")
	if err != nil {
		return nil, "", fmt.Errorf("guestbuild: %w", err)
	}
	tmpName := tmp.Name()
	tmp.Close()
	defer os.Remove(tmpName) // no-op after a successful rename
	if err := build(tmpName); err != nil {
		return nil, "", err
	}
	b, err := os.ReadFile(tmpName)
	if err != nil {
		return nil, "", fmt.Errorf("guestbuild: %w", err)
	}
	// A compiler that exits 0 without writing the module (or writes
	// something else) is an error, and nothing is cached.
	if err := CheckModule(b); err != nil {
		return nil, "", fmt.Errorf("guestbuild: the build of %s wrote no valid module: %w", name, err)
	}
	rec, err := record()
	if err != nil {
		return nil, "", err
	}
	if b, err = withRecord(b, rec, dir); err != nil {
		return nil, "", err
	}
	if key == "" {
		return b, "", nil
	}
	after, err := rekey()
	if err != nil {
		return b, "", nil
	}
	if after != key {
		// A file changed while the compiler ran: the record, read
		// after, may name other bytes than the compiler read. Neither
		// is kept or returned.
		return nil, "", fmt.Errorf("guestbuild: %s: %w", name, ErrSourceChanged)
	}
	if err := os.WriteFile(tmpName, b, 0o644); err != nil {
		return nil, "", fmt.Errorf("guestbuild: %w", err)
	}
	if err := os.Rename(tmpName, path); err != nil {
		return nil, "", fmt.Errorf("guestbuild: %w", err)
	}
	return b, path, nil
}

// cacheHit returns the module cached at path, with dir's VCS revision in
// its record. An entry that is not a module (empty, cut short: written by
// an older build or damaged) is not used: it is built again and replaced.
func cacheHit(path, dir string) ([]byte, bool) {
	b, err := os.ReadFile(path)
	if err != nil || CheckModule(b) != nil {
		return nil, false
	}
	// Used now: a cache capped by size keeps what was used last (mandate
	// cache prune --max-size).
	t := time.Now()
	os.Chtimes(path, t, t)
	return currentVCS(path, b, dir), true
}

// run runs a compiler in dir; its error carries the command line and the
// compiler's stderr (also copied to stderr when that is set).
func run(ctx context.Context, dir string, env []string, stderr io.Writer, bin string, args ...string) error {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = env
	var buf bytes.Buffer
	cmd.Stderr = &buf
	if stderr != nil {
		cmd.Stderr = io.MultiWriter(&buf, stderr)
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("guestbuild: %s %s in %s: %w\n%s",
			bin, strings.Join(args, " "), dir, err, strings.TrimSpace(buf.String()))
	}
	return nil
}

// MustBuild is Build for test setup (TestMain, benchmarks): it panics on
// error. The cache directory is Options.CacheDir's default.
func MustBuild(dir string, reactor bool) []byte {
	b, _, err := Build(context.Background(), dir, Options{Reactor: reactor})
	if err != nil {
		panic(err)
	}
	return b
}

// IsReactor reports whether a non-test .go file directly in dir has a line
// that is exactly ReactorMarker (surrounding spaces ignored).
func IsReactor(dir string) (bool, error) {
	return hasGoLine(dir, func(line string) bool { return strings.TrimSpace(line) == ReactorMarker })
}

// hasGoLine reports whether a line of a non-test .go file directly in dir
// satisfies match.
func hasGoLine(dir string, match func(line string) bool) (bool, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("guestbuild: %w", err)
	}
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := os.Open(filepath.Join(dir, n))
		if err != nil {
			return false, fmt.Errorf("guestbuild: %w", err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		found := false
		for sc.Scan() {
			if match(sc.Text()) {
				found = true
				break
			}
		}
		err = sc.Err()
		f.Close()
		if found {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("guestbuild: %s: %w", n, err)
		}
	}
	return false, nil
}

// listPackage and listModule are the parts of go list's output the key uses.
type listPackage struct {
	Dir        string
	ImportPath string
	Standard   bool
	DepOnly    bool
	Incomplete bool
	Module     *listModule
	Error      *listError
	DepsErrors []*listError

	GoFiles      []string
	CgoFiles     []string
	CFiles       []string
	CXXFiles     []string
	MFiles       []string
	HFiles       []string
	FFiles       []string
	SFiles       []string
	SwigFiles    []string
	SwigCXXFiles []string
	SysoFiles    []string
	EmbedFiles   []string
}

type listModule struct {
	Path     string
	Version  string
	Main     bool
	Dir      string
	GoMod    string
	Sum      string
	GoModSum string
	Replace  *listModule
	Error    *listError
}

type listError struct {
	Pos string
	Err string
}

// listFields is go list's -json field selection: the fields above.
const listFields = "Dir,ImportPath,Standard,DepOnly,Incomplete,Module,Error,DepsErrors," +
	"GoFiles,CgoFiles,CFiles,CXXFiles,MFiles,HFiles,FFiles,SFiles,SwigFiles,SwigCXXFiles,SysoFiles,EmbedFiles"

// envVars are the go env variables the key uses.
var envVars = []string{"GOVERSION", "GOFLAGS", "GOEXPERIMENT", "GOWASM", "GOROOT", "GOMODCACHE", "GOWORK", "GOENV"}

// Key returns the hex cache key of the guest in dir (see the package doc).
// When the build cannot be keyed, the error wraps ErrUncacheable.
func Key(ctx context.Context, dir string, reactor bool, goBin string) (string, error) {
	return key(ctx, dir, reactor, false, goBin, buildEnv())
}

// key is Key with the build's environment.
func key(ctx context.Context, dir string, reactor, mainEntry bool, goBin string, bEnv []string) (string, error) {
	k, _, err := keyStamped(ctx, dir, reactor, mainEntry, goBin, bEnv, nil, "")
	return k, err
}

// goSource is what a Go guest's record says of its source, toolchain and
// SDK, collected as its key is computed (the key covers all of it).
type goSource struct {
	files     []RecordFile
	sdk       RecordSDK
	toolchain map[string]string
	goflags   string
}

// keyStamped is key that also stamps, into st when it is not nil, every
// path whose change could change the key (keymemo.go), before it reads
// any of them, and returns what the build's record says of the source.
// cacheDir is the build's: a go.work in it (the embedded SDK's, sdk.go)
// is not the guest's source.
//
// The record's source files are those the key hashes by content, other
// than the guest SDK's: the files of each package of the build that is
// not from the module cache or the standard library (its .go files,
// embedded files and the other lists go list gives), its module's go.mod,
// go.sum and vendor/modules.txt, a default.pgo or -pgo profile, and the
// workspace's go.work and go.work.sum; each named relative to the guest's
// folder (a module root above it gives "../go.mod"). The SDK, when a
// package of the build is from it and not from the module cache, is
// recorded and hashed as its whole tree (sdkRecord).
func keyStamped(ctx context.Context, dir string, reactor, mainEntry bool, goBin string, bEnv []string, st *stamper, cacheDir string) (string, *goSource, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", nil, err
	}
	src := &goSource{}
	// srcFile hashes a file the build reads into the key and, unless
	// sdk, into the record's source.
	var h io.Writer
	srcFile := func(name, path string, sdk bool) error {
		b, ok, err := hashFileB(h, name, path)
		if err != nil || !ok || sdk {
			return err
		}
		f, err := sourceFile(dir, path, b)
		if err != nil {
			return err
		}
		src.files = append(src.files, f)
		return nil
	}
	// go env and go list run side by side; go list is the slow one.
	var (
		env    map[string]string
		envErr error
		wg     sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		env, envErr = goEnv(ctx, goBin, dir, bEnv)
	}()
	pkgs, listErr := goList(ctx, goBin, dir, reactor || mainEntry, bEnv)
	wg.Wait()
	if envErr != nil {
		return "", nil, envErr
	}
	if listErr != nil {
		return "", nil, listErr
	}

	if st != nil {
		if err := stampKey(st, dir, goBin, env, pkgs); err != nil {
			st.ok = false
		}
	}

	hh := sha256.New()
	h = hh
	fmt.Fprintf(h, "%s\x00reactor=%t\x00", keyVersion, reactor)
	if mainEntry {
		// The added file is in no list go list gives (it runs without
		// the overlay; the file imports nothing): hashed here.
		fmt.Fprintf(h, "main-entry\x00%s\x00%s\x00", mainEntrySource, mainEntryLDFlags)
	}
	for _, v := range envVars[:5] { // the toolchain; GOMODCACHE and GOWORK are used below
		fmt.Fprintf(h, "%s=%s\x00", v, env[v])
	}
	// Uncacheable by GOFLAGS: the record's source is still collected.
	var uncacheable error
	for _, f := range strings.Fields(env["GOFLAGS"]) {
		name, val, _ := strings.Cut(strings.TrimLeft(strings.Trim(f, `"'`), "-"), "=")
		switch name {
		case "overlay", "toolexec", "pkgdir":
			uncacheable = fmt.Errorf("guestbuild: %s: %w: GOFLAGS has -%s", dir, ErrUncacheable, name)
		case "pgo":
			if val != "auto" && val != "off" {
				p := val
				if !filepath.IsAbs(p) {
					p = filepath.Join(dir, p)
				}
				if err := srcFile("pgo", p, false); err != nil {
					return "", nil, err
				}
			}
		}
	}
	if w := env["GOWORK"]; w != "" && w != "off" {
		ours := cacheDir != "" && strings.HasPrefix(w, filepath.Clean(cacheDir)+string(filepath.Separator))
		for _, f := range [][2]string{
			{"go.work", w},
			{"go.work.sum", w + ".sum"},
			{"go.work/vendor/modules.txt", filepath.Join(filepath.Dir(w), "vendor", "modules.txt")},
		} {
			if err := srcFile(f[0], f[1], ours); err != nil {
				return "", nil, err
			}
		}
	}

	modCache := env["GOMODCACHE"]
	seen := map[string]bool{}
	sdkRoot := ""
	for _, p := range pkgs {
		if p.Standard {
			fmt.Fprintf(h, "std\x00%s\x00", p.ImportPath)
			continue
		}
		m := p.Module
		if m != nil && fromModCache(p, modCache) {
			fmt.Fprintf(h, "pkg\x00%s\x00cached\x00", p.ImportPath)
			if id := "cached\x00" + moduleID(m); !seen[id] {
				seen[id] = true
				fmt.Fprintf(h, "module\x00%s\x00", id)
			}
			continue
		}
		fmt.Fprintf(h, "pkg\x00%s\x00local\x00", p.ImportPath)
		// The SDK's packages are the SDK's, not the guest's, unless the
		// guest's folder holds them (a guest inside the SDK's module).
		isSDK := m != nil && m.Path == SDKModule && !within(p.Dir, dir)
		if isSDK && sdkRoot == "" {
			sdkRoot = m.Dir
		}
		for _, list := range [][]string{p.GoFiles, p.CgoFiles, p.CFiles, p.CXXFiles, p.MFiles, p.HFiles,
			p.FFiles, p.SFiles, p.SwigFiles, p.SwigCXXFiles, p.SysoFiles, p.EmbedFiles} {
			for _, f := range list {
				if err := srcFile(p.ImportPath+"/"+f, filepath.Join(p.Dir, f), isSDK); err != nil {
					return "", nil, err
				}
			}
			h.Write([]byte{0})
		}
		if !p.DepOnly {
			if err := srcFile(p.ImportPath+"/default.pgo", filepath.Join(p.Dir, "default.pgo"), isSDK); err != nil {
				return "", nil, err
			}
		}
		if m == nil {
			continue
		}
		id := "local\x00" + moduleID(m)
		if seen[id] {
			continue
		}
		seen[id] = true
		fmt.Fprintf(h, "module\x00%s\x00", id)
		if m.GoMod != "" {
			if err := srcFile(m.Path+"/go.mod", m.GoMod, isSDK); err != nil {
				return "", nil, err
			}
			if err := srcFile(m.Path+"/go.sum", strings.TrimSuffix(m.GoMod, ".mod")+".sum", isSDK); err != nil {
				return "", nil, err
			}
		}
		if m.Main && m.Dir != "" {
			if err := srcFile(m.Path+"/vendor/modules.txt", filepath.Join(m.Dir, "vendor", "modules.txt"), isSDK); err != nil {
				return "", nil, err
			}
		}
	}
	// The SDK: from the module cache, pinned by its module's sums above;
	// else its whole tree, which the record names.
	for _, p := range pkgs {
		if m := p.Module; m != nil && m.Path == SDKModule && fromModCache(p, modCache) {
			if src.sdk, err = sdkRecord(m.Dir, m.Version); err != nil {
				return "", nil, err
			}
			break
		}
	}
	if sdkRoot != "" {
		if src.sdk, err = sdkRecord(sdkRoot, ""); err != nil {
			return "", nil, err
		}
	}
	fmt.Fprintf(h, "sdk\x00%s\x00%s\x00", src.sdk.Version, src.sdk.Digest)
	src.toolchain = map[string]string{"go": env["GOVERSION"]}
	for _, v := range []string{"GOEXPERIMENT", "GOWASM"} {
		if env[v] != "" {
			src.toolchain[v] = env[v]
		}
	}
	src.goflags = recordedGOFLAGS(env["GOFLAGS"])
	// The record's names of the files (their content is hashed above).
	sort.Slice(src.files, func(i, j int) bool { return src.files[i].Path < src.files[j].Path })
	src.files = compactFiles(src.files)
	for _, f := range src.files {
		fmt.Fprintf(h, "source\x00%s\x00", f.Path)
	}
	if uncacheable != nil {
		return "", src, uncacheable
	}
	return hex.EncodeToString(hh.Sum(nil)), src, nil
}

// within reports whether path is dir or under it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// goflagsNoOutput are GOFLAGS that do not change what a build writes
// (where the module cache is written, how many jobs run, what is
// printed) or that the build sets itself: a record leaves them out, so
// that one person's go env -w GOFLAGS=-modcacherw does not make their
// module differ from another's.
var goflagsNoOutput = []string{"modcacherw", "mod", "p", "x", "v", "n", "a", "work", "buildvcs", "trimpath", "json"}

// recordedGOFLAGS is GOFLAGS as a record names it: without
// goflagsNoOutput.
func recordedGOFLAGS(goflags string) string {
	var kept []string
	for _, f := range strings.Fields(goflags) {
		name, _, _ := strings.Cut(strings.TrimLeft(strings.Trim(f, `"'`), "-"), "=")
		if !slices.Contains(goflagsNoOutput, name) {
			kept = append(kept, f)
		}
	}
	return strings.Join(kept, " ")
}

// fromModCache reports whether p's files come from the module cache: its
// module has a version, is not replaced by a directory, and p's directory
// is under GOMODCACHE (vendored copies are not, and are hashed by content).
func fromModCache(p *listPackage, modCache string) bool {
	m := p.Module
	if m.Main || m.Version == "" || (m.Replace != nil && m.Replace.Version == "") {
		return false
	}
	return modCache != "" && strings.HasPrefix(p.Dir, filepath.Clean(modCache)+string(filepath.Separator))
}

// moduleID is a module's path, version and sums, and its replacement's.
func moduleID(m *listModule) string {
	id := m.Path + "@" + m.Version + "\x00" + m.Sum + "\x00" + m.GoModSum
	if r := m.Replace; r != nil {
		id += "\x00=>\x00" + r.Path + "@" + r.Version + "\x00" + r.Sum + "\x00" + r.GoModSum
	}
	return id
}

// goList runs go list -e -deps on the package in dir, as the build would
// load it, sorted by import path. A failed run and any package or module
// error are ErrUncacheable.
func goList(ctx context.Context, goBin, dir string, reactor bool, env []string) ([]*listPackage, error) {
	args := append([]string{"list", "-e", "-deps", "-json=" + listFields}, buildFlags(reactor)...)
	args = append(args, ".")
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = dir
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("guestbuild: %s list in %s: %w: %w\n%s",
			goBin, dir, ErrUncacheable, err, strings.TrimSpace(stderr.String()))
	}
	var pkgs []*listPackage
	var problems []string
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := new(listPackage)
		if err := dec.Decode(p); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("guestbuild: %s list in %s: %w: %w", goBin, dir, ErrUncacheable, err)
		}
		if p.Error != nil {
			problems = append(problems, p.ImportPath+": "+p.Error.String())
		}
		for _, e := range p.DepsErrors {
			problems = append(problems, e.String())
		}
		if m := p.Module; m != nil && m.Error != nil {
			problems = append(problems, "module "+m.Path+": "+m.Error.Err)
		}
		if p.Incomplete && p.Error == nil && len(p.DepsErrors) == 0 {
			problems = append(problems, p.ImportPath+": incomplete")
		}
		pkgs = append(pkgs, p)
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		problems = compact(problems)
		return nil, fmt.Errorf("guestbuild: %s: %w: go list: %s", dir, ErrUncacheable, strings.Join(problems, "; "))
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].ImportPath < pkgs[j].ImportPath })
	return pkgs, nil
}

func (e *listError) String() string {
	if e.Pos != "" {
		return e.Pos + ": " + e.Err
	}
	return e.Err
}

func compact(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// goEnv runs go env in dir with the build's environment, so toolchain
// selection, go env -w settings and workspace discovery are the build's. A
// failure is ErrUncacheable: the build then reports the go tool's error.
func goEnv(ctx context.Context, goBin, dir string, env []string) (map[string]string, error) {
	cmd := exec.CommandContext(ctx, goBin, append([]string{"env", "-json"}, envVars...)...)
	cmd.Dir = dir
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("guestbuild: %s env in %s: %w: %w\n%s",
			goBin, dir, ErrUncacheable, err, strings.TrimSpace(stderr.String()))
	}
	vars := map[string]string{}
	if err := json.Unmarshal(out, &vars); err != nil {
		return nil, fmt.Errorf("guestbuild: %s env: %w", goBin, err)
	}
	return vars, nil
}

// hashFile writes name, length and content; a missing file hashes as absent.
func hashFile(h io.Writer, name, path string) error {
	_, _, err := hashFileB(h, name, path)
	return err
}

// hashFileB is hashFile that returns the content, and false for a missing
// file.
func hashFileB(h io.Writer, name, path string) ([]byte, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(h, "%s\x00absent\x00", name)
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("guestbuild: %w", err)
	}
	fmt.Fprintf(h, "%s\x00%d\x00", name, len(b))
	h.Write(b)
	return b, true, nil
}
