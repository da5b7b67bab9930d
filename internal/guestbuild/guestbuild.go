// Package guestbuild builds a Go guest (a main package) to WebAssembly
// (GOOS=wasip1 GOARCH=wasm) and keeps the result in a content-addressed cache,
// so tests and the CLI rebuild a guest only when something it depends on
// changed.
//
//	wasm, path, err := guestbuild.Build(ctx, "testdata/guests/hello", guestbuild.Options{})
//	if err != nil {
//		log.Fatal(err) // includes the go tool's stderr
//	}
//	fmt.Println(len(wasm), path) // path is the cached .wasm file
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
// # Cache key
//
// The key is the SHA-256 over: the go tool's version and the environment
// that changes its output (GOFLAGS, GOEXPERIMENT, GOWASM), the build mode,
// and the relative path and content of
//   - every regular, non-hidden file under the guest directory except *.wasm
//     (this covers *.go, go.mod, go.sum and files the guest may //go:embed);
//   - go.mod and go.sum of the module that holds the guest;
//   - every *.go, go.mod and go.sum file under guest-sdk/ of the Mandate module
//     (github.com/mandatevm/mandate), found by walking up from the guest.
//
// Other dependencies (the module cache) are pinned by go.sum.
//
// The cache directory is Options.CacheDir, or $MANDATE_CACHE_DIR/guests when
// that variable is set, or os.UserCacheDir()/mandate/guests. Entries are
// written to a temporary file and renamed into place, so concurrent builds
// of the same guest (for instance parallel test binaries) are safe.
package guestbuild

import (
	"bufio"
	"bytes"
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
	"runtime"
	"sort"
	"strings"
	"sync"
)

// MandateModule is the module path of this repository; guests import its
// guest-sdk.
const MandateModule = "github.com/mandatevm/mandate"

// ReactorMarker is the comment line that marks a guest as a reactor.
const ReactorMarker = "//mandate:reactor"

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
	// Stderr, when set, also receives the go tool's stderr.
	Stderr io.Writer
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
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// Build builds the main package in dir for GOOS=wasip1 GOARCH=wasm, or
// returns the cached result. It returns the module's bytes and the path of
// the cached file. A failed build's error includes the go tool's stderr.
func Build(ctx context.Context, dir string, opt Options) (wasm []byte, path string, err error) {
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, "", err
	}
	reactor := opt.Reactor
	if !reactor {
		if reactor, err = IsReactor(dir); err != nil {
			return nil, "", err
		}
	}
	goBin := opt.GoBin
	if goBin == "" {
		goBin = GoBin()
	}
	cacheDir := opt.CacheDir
	if cacheDir == "" {
		cacheDir = DefaultCacheDir()
	}

	key, err := Key(ctx, dir, reactor, goBin)
	if err != nil {
		return nil, "", err
	}
	name := filepath.Base(dir)
	path = filepath.Join(cacheDir, name+"-"+key[:32]+".wasm")
	if b, err := os.ReadFile(path); err == nil {
		return b, path, nil
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

	args := []string{"build", "-trimpath", "-o", tmpName}
	if reactor {
		args = append(args, "-buildmode=c-shared")
	}
	args = append(args, ".")
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	if opt.Stderr != nil {
		cmd.Stderr = io.MultiWriter(&stderr, opt.Stderr)
	} else {
		cmd.Stderr = &stderr
	}
	if err := cmd.Run(); err != nil {
		return nil, "", fmt.Errorf("guestbuild: %s %s in %s: %w\n%s",
			goBin, strings.Join(args, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	b, err := os.ReadFile(tmpName)
	if err != nil {
		return nil, "", fmt.Errorf("guestbuild: %w", err)
	}
	if err := os.Rename(tmpName, path); err != nil {
		return nil, "", fmt.Errorf("guestbuild: %w", err)
	}
	return b, path, nil
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
			if strings.TrimSpace(sc.Text()) == ReactorMarker {
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

// Key returns the hex cache key of the guest in dir (see the package doc).
func Key(ctx context.Context, dir string, reactor bool, goBin string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	toolID, err := toolIdentity(ctx, goBin)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "guestbuild v1\x00%s\x00reactor=%t\x00", toolID, reactor)

	// The guest's own files.
	if err := hashTree(h, "guest", dir, func(rel string) bool {
		return !strings.HasSuffix(rel, ".wasm")
	}); err != nil {
		return "", err
	}
	// The module that holds it, and the Mandate module's guest-sdk.
	modRoot := findUp(dir, func(d string) bool { return fileExists(filepath.Join(d, "go.mod")) })
	if modRoot != "" {
		for _, n := range []string{"go.mod", "go.sum"} {
			if err := hashFile(h, "mod/"+n, filepath.Join(modRoot, n)); err != nil {
				return "", err
			}
		}
	}
	mandRoot := findUp(dir, isMandateRoot)
	if mandRoot != "" && mandRoot != modRoot {
		for _, n := range []string{"go.mod", "go.sum"} {
			if err := hashFile(h, "mandate/"+n, filepath.Join(mandRoot, n)); err != nil {
				return "", err
			}
		}
	}
	if mandRoot != "" {
		sdk := filepath.Join(mandRoot, "guest-sdk")
		if fileExists(sdk) {
			if err := hashTree(h, "sdk", sdk, func(rel string) bool {
				b := filepath.Base(rel)
				return strings.HasSuffix(b, ".go") || b == "go.mod" || b == "go.sum"
			}); err != nil {
				return "", err
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// hashTree hashes the relative path and content of every regular,
// non-hidden file under root that keep accepts, in lexical order.
func hashTree(h io.Writer, tag, root string, keep func(rel string) bool) error {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if p != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if p != root && name == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if keep(rel) {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("guestbuild: %w", err)
	}
	sort.Strings(files)
	for _, rel := range files {
		if err := hashFile(h, tag+"/"+rel, filepath.Join(root, filepath.FromSlash(rel))); err != nil {
			return err
		}
	}
	return nil
}

// hashFile writes name, length and content; a missing file hashes as absent.
func hashFile(h io.Writer, name, path string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(h, "%s\x00absent\x00", name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("guestbuild: %w", err)
	}
	fmt.Fprintf(h, "%s\x00%d\x00", name, len(b))
	h.Write(b)
	return nil
}

var toolIDs sync.Map // goBin -> string

// toolIdentity is the go tool's version and the environment that changes
// its output, memoized per go command (running "go env" costs ~10 ms).
func toolIdentity(ctx context.Context, goBin string) (string, error) {
	envKey := goBin + "\x00" + os.Getenv("GOFLAGS") + "\x00" + os.Getenv("GOEXPERIMENT") + "\x00" + os.Getenv("GOWASM") + "\x00" + os.Getenv("GOROOT")
	if v, ok := toolIDs.Load(envKey); ok {
		return v.(string), nil
	}
	cmd := exec.CommandContext(ctx, goBin, "env", "GOVERSION", "GOFLAGS", "GOEXPERIMENT", "GOWASM", "GOROOT")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("guestbuild: %s env: %w\n%s", goBin, err, strings.TrimSpace(stderr.String()))
	}
	id := strings.Join(strings.Fields(string(out)), " ")
	toolIDs.Store(envKey, id)
	return id, nil
}

func findUp(dir string, ok func(string) bool) string {
	for {
		if ok(dir) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

func isMandateRoot(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "module" && strings.Trim(f[1], `"`) == MandateModule {
			return true
		}
	}
	return false
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
