package guestbuild

// # Rust guests
//
// A directory with a Cargo.toml is a Rust guest (see Lang). Build compiles
// it with rustc alone, no cargo: first the guest SDK's crate
// (SDKDir/rust/src/lib.rs, crate "mandate") to an rlib, then the guest's
// src/main.rs against it (--extern mandate=...), both with RustFlags, into
// a WASI command module. The Cargo.toml is read only for the package's
// name and edition, and to refuse dependencies other than mandate (which
// always resolves to SDKDir's copy, whatever path the Cargo.toml gives).
//
// The target is WASI preview 1, which Rust names wasm32-wasip1 since 1.78
// and named wasm32-wasi until 1.84 removed that name (Debian 12's rustc
// 1.63 knows only wasm32-wasi). A rustc builds for the first of
// RustTargets whose standard library it has: its sysroot's
// lib/rustlib/<target>/lib holds a libstd rlib.
//
// The compiler is $MANDATE_RUSTC when set; otherwise the first of
// /usr/bin/rustc and the rustc on PATH that has one of those standard
// libraries (a rustup rustc, often first on PATH, has none until `rustup
// target add wasm32-wasip1`).
//
// The module is the same wherever the guest and the SDK are and whoever
// builds it (tested by building one guest in two checkouts): rustc runs
// in the guest's folder on src/main.rs (a relative name, which is what
// file!() and panic locations say), the SDK's crate folder is remapped to
// "mandate", -C strip=debuginfo leaves no DWARF (and so no working
// directory), and no -C metadata is given: the crates' symbol hashes
// depend on their names and sources, not on folders. No cargo runs, so
// CARGO_HOME and a target folder play no part.
//
// The cache key is the SHA-256 over rustKeyVersion, the compiler's path,
// its `--version --verbose` output and the names of the files of its
// target's library directory, the flags (the target among them), the name
// and content of the guest's Cargo.toml, Cargo.lock and of every file
// under its src/ and under SDKDir/rust (hidden ones aside), and the
// digest of the SDK's whole tree. The build's record names the guest's
// files and that digest.

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// rustKeyVersion changes whenever what the Rust key covers changes.
const rustKeyVersion = "guestbuild rust v3" // v2: the module carries its record; v3: hidden files are not source

// The names of WASI preview 1 in Rust.
const (
	RustTargetWASIP1 = "wasm32-wasip1" // Rust 1.78 and later
	RustTargetWASI   = "wasm32-wasi"   // until Rust 1.84 (Debian 12's rustc 1.63)
)

// RustTargets are the targets a Rust guest may be built for, the preferred
// first: the same WASI, under its two names.
func RustTargets() []string { return []string{RustTargetWASIP1, RustTargetWASI} }

// RustFlags returns the rustc flags of both compilations (the SDK's and
// the guest's), after --edition and --crate-type: a small module
// (optimised for size, no unwinding tables, no debug info, one codegen
// unit) for target. The guest's adds -C lto=fat.
func RustFlags(target string) []string {
	return []string{
		"--target", target,
		"-C", "opt-level=s",
		"-C", "panic=abort",
		"-C", "strip=debuginfo",
		"-C", "codegen-units=1",
	}
}

// rustGuestFlags are added for the guest's compilation: link-time
// optimisation across the guest, the SDK and std.
var rustGuestFlags = []string{"-C", "lto=fat"}

// RustHint says how to get a Rust toolchain that builds guests.
const RustHint = "Rust guests need rustc with the standard library of wasm32-wasip1 " +
	"(or of wasm32-wasi, its name before Rust 1.84): on Debian, apt-get install " + RustPackages +
	" (rustc 1.63, wasm32-wasi) and use /usr/bin/rustc; with rustup, `rustup target add wasm32-wasip1` " +
	"(a rustup rustc first on PATH has none until then); MANDATE_RUSTC names the rustc to use"

// ErrNoRustToolchain is wrapped by the error of a Rust build (and of
// RustToolchain) when no rustc with a WASI standard library is found;
// tests skip on it.
var ErrNoRustToolchain = errors.New("no rustc with the wasm32-wasip1 or wasm32-wasi standard library")

// rustDepsNotice is the message of a Cargo.toml that depends on crates other
// than the SDK.
const rustDepsNotice = "mandate build builds Rust guests with rustc and the SDK alone; " +
	"for other crates build with cargo build --release --target wasm32-wasip1 (wasm32-wasi before Rust 1.78) " +
	"and point the manifest's module at the .wasm"

// RustPackages are the Debian packages a Rust guest's build needs.
const RustPackages = "rustc libstd-rust-dev-wasm32"

// Rust is a toolchain that builds Rust guests.
type Rust struct {
	Rustc  string // the compiler
	Target string // one of RustTargets
	Libdir string // the target's standard library
}

// FindRust finds the rustc that builds Rust guests and its target (as the
// comment at the top of this file says). The error wraps
// ErrNoRustToolchain and says what to install.
func FindRust(ctx context.Context) (Rust, error) {
	var cands []string
	if p := os.Getenv("MANDATE_RUSTC"); p != "" {
		cands = []string{p}
	} else {
		cands = []string{"/usr/bin/rustc"}
		if p, err := exec.LookPath("rustc"); err == nil && p != cands[0] {
			cands = append(cands, p)
		}
	}
	var tried []string
	for _, c := range cands {
		target, dir, err := rustTarget(ctx, c)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", c, err))
			continue
		}
		return Rust{Rustc: c, Target: target, Libdir: dir}, nil
	}
	return Rust{}, fmt.Errorf("guestbuild: %w (%s). %s", ErrNoRustToolchain, strings.Join(tried, "; "), RustHint)
}

// RustToolchain is FindRust's compiler and library directory.
func RustToolchain(ctx context.Context) (rustc, libdir string, err error) {
	r, err := FindRust(ctx)
	return r.Rustc, r.Libdir, err
}

// rustTarget asks rustc for its sysroot and the targets it knows, then
// picks its target (pickRustTarget); an error when rustc does not run or
// has no WASI standard library.
func rustTarget(ctx context.Context, rustc string) (target, libdir string, err error) {
	out, err := exec.CommandContext(ctx, rustc, "--print", "sysroot").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", "", fmt.Errorf("%v: %s", err, firstLine(ee.Stderr))
		}
		return "", "", err
	}
	sysroot := strings.TrimSpace(string(out))
	var known []string
	if out, err := exec.CommandContext(ctx, rustc, "--print", "target-list").Output(); err == nil {
		known = strings.Fields(string(out))
	}
	return pickRustTarget(sysroot, known)
}

// pickRustTarget is the first of RustTargets whose standard library is in
// sysroot, with its directory. known are the targets the compiler knows
// (rustc --print target-list; nil when unknown): when none has its library,
// the error names the one to install, wasm32-wasip1 unless the compiler
// knows only wasm32-wasi.
func pickRustTarget(sysroot string, known []string) (target, libdir string, err error) {
	for _, t := range RustTargets() {
		dir := filepath.Join(sysroot, "lib", "rustlib", t, "lib")
		if std, _ := filepath.Glob(filepath.Join(dir, "libstd-*.rlib")); len(std) > 0 {
			return t, dir, nil
		}
	}
	want, how := RustTargetWASIP1, "rustup target add "+RustTargetWASIP1
	if known != nil && !slices.Contains(known, RustTargetWASIP1) && slices.Contains(known, RustTargetWASI) {
		want, how = RustTargetWASI, "apt-get install libstd-rust-dev-wasm32 for Debian's rustc, or rustup target add "+RustTargetWASI
	}
	return "", "", fmt.Errorf("no %s standard library in %s (%s)", want, filepath.Join(sysroot, "lib", "rustlib"), how)
}

// firstLine is the first line of a tool's error output that says
// something, cut to 300 bytes: what follows it (a rustup note, a
// backtrace) is noise in mandate's one-line error.
func firstLine(b []byte) string {
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if len(l) > 300 {
				l = l[:300] + "..."
			}
			return l
		}
	}
	return "(no error output)"
}

// cargoManifest is what Build reads of a Cargo.toml.
type cargoManifest struct {
	name    string // the package's name
	edition string // "2021" when absent
}

// readCargo reads the package's name and edition from dir/Cargo.toml and
// refuses any dependency but mandate. It understands the TOML Cargo.toml
// files are written in (one key = value per line, [section] headers), not
// all of TOML.
func readCargo(dir string) (cargoManifest, error) {
	path := filepath.Join(dir, "Cargo.toml")
	f, err := os.Open(path)
	if err != nil {
		return cargoManifest{}, fmt.Errorf("guestbuild: %w", err)
	}
	defer f.Close()
	m := cargoManifest{edition: "2021"}
	section := ""
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(stripTOMLComment(sc.Text()))
		if s == "" {
			continue
		}
		if strings.HasPrefix(s, "[") {
			section = strings.TrimSpace(strings.Trim(s, "[]"))
			// [dependencies.foo], [target.'cfg(...)'.dependencies.foo]
			if dep, ok := depTable(section); ok && dep != "" && dep != "mandate" {
				return cargoManifest{}, fmt.Errorf("guestbuild: %s:%d: dependency %q: %s", path, line, dep, rustDepsNotice)
			}
			continue
		}
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			continue // a continued array or inline table; no key we read
		}
		k, v = strings.Trim(strings.TrimSpace(k), `"'`), strings.TrimSpace(v)
		switch dep, isDeps := depTable(section); {
		case section == "package" && k == "name":
			m.name = strings.Trim(v, `"'`)
		case section == "package" && k == "edition":
			m.edition = strings.Trim(v, `"'`)
		case section == "package" && k == "build":
			return cargoManifest{}, fmt.Errorf("guestbuild: %s:%d: a build script: %s", path, line, rustDepsNotice)
		case isDeps && dep == "" && k != "mandate":
			return cargoManifest{}, fmt.Errorf("guestbuild: %s:%d: dependency %q: %s", path, line, k, rustDepsNotice)
		}
	}
	if err := sc.Err(); err != nil {
		return cargoManifest{}, fmt.Errorf("guestbuild: %s: %w", path, err)
	}
	if m.name == "" {
		return cargoManifest{}, fmt.Errorf("guestbuild: %s: no [package] name", path)
	}
	switch m.edition {
	case "2015", "2018", "2021":
	default:
		return cargoManifest{}, fmt.Errorf("guestbuild: %s: edition %q (rustc here knows 2015, 2018 and 2021)", path, m.edition)
	}
	if _, err := os.Stat(filepath.Join(dir, "build.rs")); err == nil {
		return cargoManifest{}, fmt.Errorf("guestbuild: %s: a build script (build.rs): %s", dir, rustDepsNotice)
	}
	return m, nil
}

// stripTOMLComment cuts a line at a # outside a string.
func stripTOMLComment(line string) string {
	var quote byte
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case quote == 0 && c == '#':
			return line[:i]
		case quote == 0 && (c == '"' || c == '\''):
			quote = c
		case quote == '"' && c == '\\':
			i++ // an escape in a basic string
		case c == quote:
			quote = 0
		}
	}
	return line
}

// depTable tells whether a section header names a table of dependencies
// that the build would need ([dependencies], [build-dependencies],
// [target.X.dependencies]; not [dev-dependencies]) and, for a
// [dependencies.NAME] table, which one.
func depTable(section string) (dep string, ok bool) {
	parts := strings.Split(section, ".")
	if parts[0] == "target" && len(parts) >= 3 {
		// target.'cfg(...)'.dependencies: the cfg may hold dots.
		for i := 1; i < len(parts); i++ {
			if parts[i] == "dependencies" || parts[i] == "build-dependencies" {
				parts = parts[i:]
				break
			}
		}
	}
	if parts[0] != "dependencies" && parts[0] != "build-dependencies" {
		return "", false
	}
	if len(parts) > 1 {
		return strings.Trim(strings.Join(parts[1:], "."), `"'`), true
	}
	return "", true
}

// rustCrateName is the crate name rustc gets for a package name.
func rustCrateName(pkg string) string { return strings.ReplaceAll(pkg, "-", "_") }

// rustKey is the cache key of a Rust guest (see the doc at the top) and
// the build's record, which it covers.
func rustKey(ctx context.Context, rustc, libdir, dir, sdk string, flags []string) (string, Record, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", rustKeyVersion, rustc)
	ver, err := exec.CommandContext(ctx, rustc, "--version", "--verbose").Output()
	if err != nil {
		return "", Record{}, fmt.Errorf("guestbuild: %s --version: %w", rustc, err)
	}
	fmt.Fprintf(h, "%d\x00%s", len(ver), ver)
	libs, err := os.ReadDir(libdir)
	if err != nil {
		return "", Record{}, fmt.Errorf("guestbuild: %w", err)
	}
	for _, e := range libs {
		fmt.Fprintf(h, "lib\x00%s\x00", e.Name())
	}
	fmt.Fprintf(h, "flags\x00%s\x00", strings.Join(flags, "\x00"))
	rec := Record{
		Lang:      LangRust,
		Toolchain: map[string]string{"rustc": firstLineOf(ver)},
		Mode:      ModeCommand,
		Flags:     slices.DeleteFunc(slices.Clone(flags), func(f string) bool { return f == "\x01" }),
	}
	var src []RecordFile
	add := func(rel string, b []byte) { src = append(src, RecordFile{Path: rel, Digest: digestOf(b)}) }
	for _, f := range []string{"Cargo.toml", "Cargo.lock"} {
		b, ok, err := hashFileB(h, f, filepath.Join(dir, f))
		if err != nil {
			return "", Record{}, err
		}
		if ok {
			add(f, b)
		}
	}
	if err := hashTreeFunc(h, "guest", filepath.Join(dir, "src"), func(rel string, b []byte) { add("src/"+rel, b) }); err != nil {
		return "", Record{}, err
	}
	if err := hashTree(h, "sdk", filepath.Join(sdk, "rust")); err != nil {
		return "", Record{}, err
	}
	if rec.SDK, err = sdkRecord(sdk, ""); err != nil {
		return "", Record{}, err
	}
	fmt.Fprintf(h, "sdk\x00%s\x00%s\x00", rec.SDK.Version, rec.SDK.Digest)
	rec.Source = sourceRecord(src)
	return hex.EncodeToString(h.Sum(nil)), rec, nil
}

// hashTree hashes the name (relative to root, under prefix) and content
// of every regular file under root but hidden ones (a name starting with
// "." and what is under such a folder), in lexical order.
func hashTree(h io.Writer, prefix, root string) error {
	return hashTreeFunc(h, prefix, root, nil)
}

// hashTreeFunc is hashTree that also gives each file's slash-separated
// name relative to root and content to each, when it is not nil.
func hashTreeFunc(h io.Writer, prefix, root string, each func(rel string, b []byte)) error {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root && strings.HasPrefix(d.Name(), ".") {
			// An editor's swap file or a hidden folder: not Rust
			// source (a mod is never named so).
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("guestbuild: %w", err)
	}
	sort.Strings(files)
	for _, p := range files {
		rel, _ := filepath.Rel(root, p)
		b, ok, err := hashFileB(h, prefix+"/"+filepath.ToSlash(rel), p)
		if err != nil {
			return err
		}
		if ok && each != nil {
			each(filepath.ToSlash(rel), b)
		}
	}
	return nil
}

// rustBuild is a Rust guest's build, decided: compiler, SDK, flags.
type rustBuild struct {
	dir, sdk, sdkSrc, crate, rustc, libdir string
	sdkFlags, guestFlags                   []string
	keyFlags                               []string // both, the SDK's directory as $SDK
}

// planRust reads a Rust guest and decides its build.
func planRust(ctx context.Context, dir string, opt Options) (*rustBuild, error) {
	if opt.Reactor {
		return nil, errors.New("guestbuild: Rust guests are commands; reactors are built in Go or C")
	}
	m, err := readCargo(dir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "src", "main.rs")); err != nil {
		return nil, fmt.Errorf("guestbuild: a Rust guest is a binary crate: %w", err)
	}
	sdk, err := SDKDir(dir, opt)
	if err != nil {
		return nil, err
	}
	r := &rustBuild{dir: dir, sdk: sdk, sdkSrc: filepath.Join(sdk, "rust", "src", "lib.rs"), crate: rustCrateName(m.name)}
	if _, err := os.Stat(r.sdkSrc); err != nil {
		return nil, fmt.Errorf("guestbuild: the guest SDK has no Rust crate: %w", err)
	}
	tc, err := FindRust(ctx)
	if err != nil {
		return nil, err
	}
	r.rustc, r.libdir = tc.Rustc, tc.Libdir
	rustFlags := RustFlags(tc.Target)
	r.sdkFlags = append([]string{"--edition", "2021", "--crate-type", "rlib", "--crate-name", "mandate"}, rustFlags...)
	r.sdkFlags = append(r.sdkFlags, "--remap-path-prefix", filepath.Join(sdk, "rust")+"=mandate")
	r.guestFlags = append([]string{"--edition", m.edition, "--crate-type", "bin", "--crate-name", r.crate}, rustFlags...)
	r.guestFlags = append(r.guestFlags, rustGuestFlags...)
	// The key sees the SDK's directory as $SDK (its files are hashed), so
	// checkouts in different places share entries.
	r.keyFlags = append(append(append([]string(nil), r.sdkFlags...), "\x01"), r.guestFlags...)
	for i, f := range r.keyFlags {
		r.keyFlags[i] = strings.ReplaceAll(f, sdk, "$SDK")
	}
	return r, nil
}

// key is the build's cache key.
func (r *rustBuild) key(ctx context.Context) (string, error) {
	k, _, err := rustKey(ctx, r.rustc, r.libdir, r.dir, r.sdk, r.keyFlags)
	return k, err
}

// buildRust is Build for a Rust guest.
func buildRust(ctx context.Context, dir string, opt Options, cacheDir string) ([]byte, string, error) {
	r, err := planRust(ctx, dir, opt)
	if err != nil {
		return nil, "", err
	}
	key, rec, err := rustKey(ctx, r.rustc, r.libdir, r.dir, r.sdk, r.keyFlags)
	if err != nil {
		return nil, "", err
	}
	rekey := func() (string, error) { return r.key(ctx) }
	env := rustEnv(r.rustc)
	return cached(cacheDir, filepath.Base(dir), dir, key, rekey, func(out string) error {
		tmp, err := os.MkdirTemp(cacheDir, ".rust-*")
		if err != nil {
			return fmt.Errorf("guestbuild: %w", err)
		}
		defer os.RemoveAll(tmp)
		args := append(append([]string(nil), r.sdkFlags...), r.sdkSrc, "--out-dir", tmp)
		if err := run(ctx, dir, env, opt.Stderr, r.rustc, args...); err != nil {
			return rustErr(err)
		}
		wasm := filepath.Join(tmp, r.crate+".wasm")
		args = append(append([]string(nil), r.guestFlags...),
			"--extern", "mandate="+filepath.Join(tmp, "libmandate.rlib"),
			filepath.Join("src", "main.rs"), "-o", wasm)
		if err := run(ctx, dir, env, opt.Stderr, r.rustc, args...); err != nil {
			return rustErr(err)
		}
		return os.Rename(wasm, out)
	}, func() (Record, error) { return rec, nil })
}

// rustErr adds RustHint to a compiler error that says the target's std is
// missing.
func rustErr(err error) error {
	s := err.Error()
	if strings.Contains(s, "can't find crate for `std`") || strings.Contains(s, "target may not be installed") {
		return fmt.Errorf("%w\n%s", err, RustHint)
	}
	return err
}

// rustEnv is the compiler's environment: PATH, with rustc's own directory
// first (rustc runs the linker, rust-lld, from its sysroot or PATH; Debian
// installs it next to rustc), HOME and TMPDIR, and nothing else, so
// env!/option_env! in a guest read no variable the key does not cover.
func rustEnv(rustc string) []string {
	env := []string{"PATH=" + filepath.Dir(rustc) + string(os.PathListSeparator) + os.Getenv("PATH")}
	for _, k := range []string{"HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}
