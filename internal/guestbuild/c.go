package guestbuild

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// C guests.
//
// A C guest is every .c file directly in its directory (subdirectories are
// not part of it), compiled and linked in one clang run against wasi-libc
// and the header-only SDK in <SDKDir>/c (mandate.h):
//
//	clang --target=wasm32-wasi -O2 -I<SDKDir>/c -ffile-prefix-map=<SDKDir>/c=mandate-sdk/c \
//	    -Wl,--strip-debug -o OUT ./a.c ./b.c ...
//
// (the files sorted by name, run in the guest's directory). The result is a
// WASI command: clang's crt1 exports _start, which runs main. A guest whose
// .c files have a line that is exactly ReactorMarker is a reactor instead,
// built with -mexec-model=reactor -Wl,--export=run: the kernel calls its
// _initialize, then its exported run (mandate.h's MANDATE_ENTRY); linking
// fails when it defines no run. -Wl,--strip-debug drops the DWARF that
// wasi-libc's archive carries (two thirds of a small module); the name
// section, which engines use in stack traces, stays. The module is the same
// wherever the guest and the SDK are: the sources are named relative to
// the guest's folder, the SDK's folder is remapped (a __FILE__ in
// mandate.h would name mandate-sdk/c), and nothing is compiled with -g.
//
// The compiler is $MANDATE_CC, else CCompiler. Variables through which the
// environment could add headers, libraries or flags to the build (CPATH,
// C_INCLUDE_PATH, LIBRARY_PATH, CCC_OVERRIDE_OPTIONS and the like) are
// removed from clang's environment, so the key below covers what it reads.
//
// The cache key is the SHA-256 over cKeyVersion, the compiler's path and
// its --version output, the flags (with the SDK directory written as
// $SDK, so checkouts in different places share entries), the name and
// content of every .c and .h file in the guest's directory, and the name and
// content of every file under <SDKDir>/c. The system headers and wasi-libc
// are covered by the compiler's version: Debian's clang and wasi-libc
// packages are installed together. A module is cached only when the key
// computed again after the build is unchanged.

// CCompiler is the C compiler Build uses unless $MANDATE_CC names another.
const CCompiler = "/usr/bin/clang"

// CPackages are the Debian packages a C guest's build needs.
const CPackages = "clang lld wasi-libc libclang-rt-14-dev-wasm32"

// ErrNoCToolchain is wrapped by the error of a C build (and of
// CToolchain) when the compiler, wasi-libc or the wasm32 compiler runtime
// is missing; tests skip on it.
var ErrNoCToolchain = errors.New("no C toolchain for wasm32-wasi")

// cKeyVersion changes whenever what the C key covers, or how a C guest is
// built, changes.
const cKeyVersion = "guestbuild c v2" // v2: the module carries its record

// cEnvDrop are environment variables that would let the environment change
// what clang reads or how it runs without the key seeing it.
var cEnvDrop = []string{
	"CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "OBJC_INCLUDE_PATH", "LIBRARY_PATH",
	"COMPILER_PATH", "CCC_OVERRIDE_OPTIONS", "CCC_ADD_ARGS", "SOURCE_DATE_EPOCH",
	"CLANG_CONFIG_FILE_SYSTEM_DIR", "CLANG_CONFIG_FILE_USER_DIR", "SDKROOT", "MACOSX_DEPLOYMENT_TARGET",
}

// CCompilerPath is the C compiler Build uses: $MANDATE_CC, else CCompiler.
func CCompilerPath() string {
	if cc := os.Getenv("MANDATE_CC"); cc != "" {
		return cc
	}
	return CCompiler
}

// cFlags are the compiler flags of a C guest, the SDK's include directory
// written as sdkInc.
func cFlags(sdkInc string, reactor bool) []string {
	// The SDK's folder differs from machine to machine: a __FILE__ in
	// its header names it as mandate-sdk/c.
	f := []string{"--target=wasm32-wasi", "-O2", "-I" + sdkInc, "-ffile-prefix-map=" + sdkInc + "=mandate-sdk/c", "-Wl,--strip-debug"}
	if reactor {
		f = append(f, "-mexec-model=reactor", "-Wl,--export=run")
	}
	return f
}

// cEnv is clang's environment: this process's, less cEnvDrop.
func cEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, d := range cEnvDrop {
			if k == d {
				drop = true
				break
			}
		}
		if !drop {
			env = append(env, kv)
		}
	}
	return env
}

// noCToolchain is the error for a missing piece of the toolchain.
func noCToolchain(cc, what string) error {
	return fmt.Errorf("guestbuild: %w: %s (%s); on Debian or Ubuntu: apt-get install %s, or set MANDATE_CC to a clang that targets wasm32-wasi",
		ErrNoCToolchain, what, cc, CPackages)
}

// CToolchain checks that the C compiler Build would use exists and finds
// wasi-libc and the wasm32 compiler runtime; it returns the compiler's
// --version output. Its error wraps ErrNoCToolchain and names the Debian
// packages to install.
func CToolchain(ctx context.Context) (string, error) {
	cc := CCompilerPath()
	return cToolchain(ctx, cc)
}

// toolchains caches cToolchain's findings by compiler: its path, size and
// modification time (a compiler replaced on disk is checked again).
var toolchains sync.Map // toolchainID -> cTool

// cTool is what cToolchain finds of a C compiler.
type cTool struct {
	version string // its --version output
	libc    string // the digest of wasi-libc's libc.a
}

type toolchainID struct {
	path  string
	size  int64
	mtime int64
}

func cToolchain(ctx context.Context, cc string) (string, error) {
	t, err := cToolchainInfo(ctx, cc)
	return t.version, err
}

func cToolchainInfo(ctx context.Context, cc string) (cTool, error) {
	path, err := exec.LookPath(cc)
	if err != nil {
		return cTool{}, noCToolchain(cc, "no C compiler")
	}
	var id toolchainID
	if real, err := filepath.EvalSymlinks(path); err == nil {
		if fi, err := os.Stat(real); err == nil {
			id = toolchainID{real, fi.Size(), fi.ModTime().UnixNano()}
			if v, ok := toolchains.Load(id); ok {
				return v.(cTool), nil
			}
		}
	}
	v, err := checkCToolchain(ctx, cc, path)
	if err == nil && id.path != "" {
		toolchains.Store(id, v)
	}
	return v, err
}

func checkCToolchain(ctx context.Context, cc, path string) (cTool, error) {
	version, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return cTool{}, noCToolchain(cc, "the C compiler does not run: "+err.Error())
	}
	// clang prints the name unchanged when it finds no such file.
	out, err := exec.CommandContext(ctx, path, "--target=wasm32-wasi", "-print-file-name=libc.a").Output()
	lib := strings.TrimSpace(string(out))
	if err != nil || !filepath.IsAbs(lib) {
		return cTool{}, noCToolchain(cc, "no wasi-libc for wasm32-wasi")
	}
	// wasi-libc's identity, for the record: its archive's digest (Debian
	// versions it apart from clang).
	libc, err := os.ReadFile(lib)
	if err != nil {
		return cTool{}, noCToolchain(cc, "wasi-libc: "+err.Error())
	}
	// Without libclang-rt-14-dev-wasm32 every link fails on
	// libclang_rt.builtins-wasm32.a.
	out, err = exec.CommandContext(ctx, path, "--target=wasm32-wasi", "-print-libgcc-file-name").Output()
	rt := strings.TrimSpace(string(out))
	if err != nil || rt == "" {
		return cTool{}, noCToolchain(cc, "the compiler names no wasm32 runtime library")
	}
	if _, err := os.Stat(rt); err != nil {
		return cTool{}, noCToolchain(cc, "no "+filepath.Base(rt))
	}
	return cTool{version: string(version), libc: digestOf(libc)}, nil
}

// cSources lists the .c and .h files directly in dir, sorted, and reports
// whether a .c file has a line that is exactly ReactorMarker.
func cSources(dir string) (files []string, reactor bool, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, false, fmt.Errorf("guestbuild: %w", err)
	}
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !(strings.HasSuffix(n, ".c") || strings.HasSuffix(n, ".h")) {
			continue
		}
		files = append(files, n)
		if !strings.HasSuffix(n, ".c") || reactor {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, false, fmt.Errorf("guestbuild: %w", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 0, 64<<10), len(b)+1)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == ReactorMarker {
				reactor = true
				break
			}
		}
	}
	sort.Strings(files)
	return files, reactor, nil
}

// CKey returns the hex cache key of the C guest in dir built by the
// compiler cc against the SDK in sdk (see the comment at the top of c.go),
// and whether the guest is a reactor.
func CKey(ctx context.Context, dir, sdk, cc string, forceReactor bool) (key string, reactor bool, err error) {
	key, r, err := cKey(ctx, dir, sdk, cc, forceReactor)
	return key, r.Mode == ModeReactor, err
}

// cKey is CKey with the build's record, which the key covers (the
// guest's files by name and content, the toolchain, the SDK's tree, the
// flags).
func cKey(ctx context.Context, dir, sdk, cc string, forceReactor bool) (string, Record, error) {
	tool, err := cToolchainInfo(ctx, cc)
	if err != nil {
		return "", Record{}, err
	}
	version := tool.version
	files, reactor, err := cSources(dir)
	if err != nil {
		return "", Record{}, err
	}
	reactor = reactor || forceReactor
	rec := Record{
		Lang:      LangC,
		Toolchain: map[string]string{"clang": firstLineOf([]byte(version)), "wasi-libc": tool.libc},
		Mode:      ModeCommand,
		Flags:     cFlags("$SDK/c", reactor),
	}
	if reactor {
		rec.Mode = ModeReactor
	}
	if rec.SDK, err = sdkRecord(sdk, ""); err != nil {
		return "", Record{}, err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00cc=%s\x00%d\x00%s\x00libc=%s\x00", cKeyVersion, cc, len(version), version, tool.libc)
	fmt.Fprintf(h, "sdk\x00%s\x00%s\x00", rec.SDK.Version, rec.SDK.Digest)
	for _, f := range rec.Flags {
		fmt.Fprintf(h, "flag\x00%s\x00", f)
	}
	var src []RecordFile
	for _, f := range files {
		b, ok, err := hashFileB(h, "guest/"+f, filepath.Join(dir, f))
		if err != nil {
			return "", Record{}, err
		}
		if ok {
			src = append(src, RecordFile{Path: f, Digest: digestOf(b)})
		}
	}
	rec.Source = sourceRecord(src)
	h.Write([]byte{0})
	inc := filepath.Join(sdk, "c")
	err = filepath.WalkDir(inc, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("guestbuild: %w", err)
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(inc, p)
		if err != nil {
			return err
		}
		return hashFile(h, "sdk/"+filepath.ToSlash(rel), p)
	})
	if err != nil {
		return "", Record{}, err
	}
	return hex.EncodeToString(h.Sum(nil)), rec, nil
}

// buildC is Build for a C guest.
func buildC(ctx context.Context, dir string, opt Options, cacheDir string) ([]byte, string, error) {
	sdk, err := SDKDir(dir, opt)
	if err != nil {
		return nil, "", err
	}
	if _, err := os.Stat(filepath.Join(sdk, "c", "mandate.h")); err != nil {
		return nil, "", fmt.Errorf("guestbuild: the guest SDK in %s has no C header (c/mandate.h): %w", sdk, err)
	}
	cc := CCompilerPath()
	key, rec, err := cKey(ctx, dir, sdk, cc, opt.Reactor)
	if err != nil {
		return nil, "", err
	}
	reactor := rec.Mode == ModeReactor
	files, _, err := cSources(dir)
	if err != nil {
		return nil, "", err
	}
	var srcs []string
	for _, f := range files {
		if strings.HasSuffix(f, ".c") {
			srcs = append(srcs, "./"+f) // a name starting with "-" stays a file
		}
	}
	rekey := func() (string, error) {
		k, _, err := cKey(ctx, dir, sdk, cc, opt.Reactor)
		return k, err
	}
	return cached(cacheDir, filepath.Base(dir), dir, key, rekey, func(out string) error {
		args := append(cFlags(filepath.Join(sdk, "c"), reactor), "-o", out)
		args = append(args, srcs...)
		return run(ctx, dir, cEnv(), opt.Stderr, cc, args...)
	}, func() (Record, error) { return rec, nil })
}
