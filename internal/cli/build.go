package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/sandbox"
)

const buildHelp = `Usage: mandate build DIR [-o OUT.wasm] [--reactor] [--cache-dir DIR]
                     [--provenance FILE [--state-dir DIR]]

Builds the Go guest in DIR (a main package importing
github.com/mandatevm/mandate/guest-sdk) to WebAssembly with GOOS=wasip1
GOARCH=wasm, and prints the module's digest and file name:

	sha256:<hex>  OUT.wasm

The digest is what a manifest's digest attribute pins. Builds are cached by
the content of everything the build reads, as "go list -deps" reports it:
every package's files in the guest's module, in a module a replace or a
go.work points to, or vendored; the version and sum of each module from
the module cache; the go tool's version and settings. A guest whose
packages cannot be listed is built without the cache. Building an
unchanged guest again runs no go command: what the last build's key read
is remembered (each file's inode, size and times), and "go list" runs
again only when one of those changed. "mandate cache" shows and prunes the
cache.

A guest is a reactor (built with -buildmode=c-shared and entered through an
exported function, "run" by default) when one of its .go files has the line
//mandate:reactor, or with --reactor. A command (any other main package) is
built as a reactor too, with an exported "run" that calls main, added
from the cache (DIR is not written): its tasks start from the engine's
snapshot of the Go runtime's start and the package inits, and end as a
command's would (os.Exit codes, a panic's exit code 2).

Builds are reproducible: the same source, guest SDK and toolchain give
the same module, byte for byte, in any folder, on any machine and for any
user (paths trimmed or remapped, no build ID, no timestamps, fixed
flags). Every module ends with a custom section, "mandate.build", that
records how it was built, as JSON: the language; the toolchain's versions
(go env GOVERSION, rustc -V, clang --version and wasi-libc's digest); the
guest SDK's version and the digest of its files; the build mode and the
flags; the digest of each source file (named relative to DIR) and of the
whole source; and the git commit DIR's checkout is at, when it is in one.
The section is part of the module, so the digest printed covers it: the
same files built at another commit, or outside a checkout, differ in that
field alone. Rebuild the same commit elsewhere and compare the digests;
where they differ, the two records say why.

Flags:

	-o FILE            where to write the module (default: DIR's base name
	                   with .wasm, in the current directory)
	--reactor          build a reactor even without the //mandate:reactor marker
	--cache-dir DIR    cache root (default $MANDATE_CACHE_DIR, else the user
	                   cache directory + /mandate); guests go under DIR/guests
	--provenance FILE  also write the module's SLSA provenance (v1, from its
	                   record) as an in-toto statement in a DSSE envelope,
	                   signed with STATE_DIR/audit.key: what a tool's
	                   publisher hands out with the module; "mandate verify
	                   FILE --source DIR" checks it and rebuilds
	--state-dir DIR    whose key signs the provenance (default as mandate run)

Examples:

	mandate build ./guest -o guest.wasm
	mandate build ./planner --reactor -o planner.wasm
	mandate build ./tool -o tool.wasm --provenance tool.intoto.jsonl
`

func runBuild(e *env, args []string) int {
	c := lookupCommand("build")
	fs := flagSet("build")
	out := fs.String("o", "", "")
	reactor := fs.Bool("reactor", false, "")
	cacheFlag := fs.String("cache-dir", "", "")
	provenance := fs.String("provenance", "", "")
	stateFlag := stateDirFlag(fs)
	pos, code, ok := e.parse(c, fs, args)
	if !ok {
		return code
	}
	dir, code, ok := e.oneArg(c, pos, "the guest directory")
	if !ok {
		return code
	}
	fi, err := os.Stat(dir)
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate build: %v\n", err)
		return exitUsage
	}
	if !fi.IsDir() {
		fmt.Fprintf(e.stderr, "mandate build: %s is not a directory\n", dir)
		return exitUsage
	}
	if *out == "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			fmt.Fprintf(e.stderr, "mandate build: %v\n", err)
			return exitUsage
		}
		*out = filepath.Base(abs) + ".wasm"
	}
	cache, err := e.cacheDir(*cacheFlag)
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate build: %v\n", err)
		return exitUsage
	}
	defer e.capCache(cache)
	ctx := host.WithBuildNotes(context.Background(), func(msg string) {
		fmt.Fprintf(e.stderr, "mandate build: note: %s\n", msg)
	})
	wasm, err := host.BuildGuest(ctx, dir, *reactor, cache)
	if err != nil {
		fmt.Fprintf(e.stderr, "mandate build: %v\n", err)
		return exitUsage
	}
	if err := host.WriteFileAtomic(*out, wasm, 0o644); err != nil {
		fmt.Fprintf(e.stderr, "mandate build: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(e.stdout, "%s  %s\n", sandbox.Digest(wasm), *out)
	if *provenance != "" {
		if err := e.writeProvenance(*provenance, *stateFlag, filepath.Base(*out), wasm); err != nil {
			fmt.Fprintf(e.stderr, "mandate build: provenance: %v\n", err)
			return exitUsage
		}
	}
	return exitOK
}

// writeProvenance writes the SLSA provenance of wasm (named name), from
// its build record, signed with the state directory's key, to path.
func (e *env) writeProvenance(path, stateFlag, name string, wasm []byte) error {
	rec, ok, err := guestbuild.ReadRecord(wasm)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("the module carries no build record")
	}
	st, err := host.ProvenanceStatement(name, sandbox.Digest(wasm), rec)
	if err != nil {
		return err
	}
	dir, err := e.stateDir(stateFlag)
	if err != nil {
		return err
	}
	log, err := audit.Open(auditPath(dir))
	if err != nil {
		return err
	}
	defer log.Close()
	env, err := log.SignStatement(st)
	if err != nil {
		return err
	}
	b, err := audit.EncodeEnvelopes(env)
	if err != nil {
		return err
	}
	if err := host.WriteFileAtomic(path, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "mandate build: provenance %s, signed with %s (mandate audit key)\n", path, strings.SplitN(log.VerifierKey(), "+", 2)[0])
	return nil
}

// cacheDir returns the cache root: flag, else $MANDATE_CACHE_DIR, else
// os.UserCacheDir()/mandate; absolute, so that what runs in another
// directory (the go tool, in the guest's) finds the same place.
func (e *env) cacheDir(flagValue string) (string, error) {
	if flagValue != "" {
		return filepath.Abs(flagValue)
	}
	if d := e.getenv("MANDATE_CACHE_DIR"); d != "" {
		return filepath.Abs(d)
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: set --cache-dir or MANDATE_CACHE_DIR (%v)", err)
	}
	return filepath.Join(d, "mandate"), nil
}
