//go:build wasmtime

package wasmtime

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	wt "github.com/bytecodealliance/wasmtime-go/v39"
)

// The on-disk cache of compiled modules.
//
// A file is a module as wasmtime's Module.Serialize produced it: native code
// that NewModuleDeserialize maps and runs without checking it. So:
//
//   - the directory is named for everything that changes the code: the
//     wasmtime-go module version, GOOS/GOARCH, the revision of the rewrites
//     applied before compiling (rewriteRevision) and the engine's settings
//     (preemption, coalescing, the table cap, growth tracking). An engine
//     never looks at another version's or setting's files, and wasmtime
//     itself refuses an artifact of another version or incompatible
//     settings (that error means a recompile, too);
//   - each file carries a SHA-256 of its payload, checked before the
//     payload reaches wasmtime: a damaged file (a torn write, a flipped
//     bit) is ignored and the module is compiled again and rewritten,
//     never run;
//   - files are written to a temporary name and renamed, so a reader sees
//     a whole file or none.
//
// The checksum guards against damage, not an attacker: anyone who can write
// to the cache directory can make the host run their code, so it must be as
// private as the mandate binary itself.

// cacheMagic starts every cache file; bump its version when the layout
// changes.
const cacheMagic = "mandate-cwasm-1\n"

// rewriteRevision names the rewrites Compile applies to a module before
// wasmtime compiles it (sandbox/internal/wasmbin: Coalesce, CapTables,
// TrackGrowth). Change it whenever what they produce changes, so that no
// module compiled from the old output is loaded from the cache: a module
// cached before TrackGrowth existed would never report the memory limit.
const rewriteRevision = "rewrite-2 (track-growth)"

// wasmtimeGoModule is the module whose version keys the cache, and
// wasmtimeGoVersion its version in go.mod (TestCacheKey checks they agree).
// The binary's build information, when it has any (test binaries do not),
// wins over the constant.
const (
	wasmtimeGoModule  = "github.com/bytecodealliance/wasmtime-go/v39"
	wasmtimeGoVersion = "v39.0.1"
)

type diskCache struct {
	dir string
}

// builtVersion is the version of wasmtime-go this binary is built with.
func builtVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path != wasmtimeGoModule {
				continue
			}
			if d.Replace != nil {
				return d.Replace.Path + "@" + d.Replace.Version + "+" + d.Replace.Sum
			}
			return d.Version
		}
	}
	// Not recorded (a test binary): wasmtime still refuses an artifact of
	// another version when it loads it.
	return wasmtimeGoVersion
}

// cacheKey names the cache directory for an engine configuration.
func cacheKey(version, configDesc string) string {
	sum := sha256.Sum256([]byte(version + "\n" + runtime.GOOS + "/" + runtime.GOARCH + "\n" + rewriteRevision + "\n" + configDesc))
	safe := strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, version)
	if len(safe) > 40 {
		safe = safe[:40]
	}
	return "wasmtime-" + safe + "-" + hex.EncodeToString(sum[:8])
}

func openCache(root, configDesc string) (*diskCache, error) {
	dir := filepath.Join(root, cacheKey(builtVersion(), configDesc))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return &diskCache{dir: dir}, nil
}

func (c *diskCache) path(digest string) string {
	return filepath.Join(c.dir, strings.TrimPrefix(digest, "sha256:")+".cwasm")
}

// load returns the cached module for digest, or nil when there is none or
// it can not be used.
func (c *diskCache) load(digest string, eng *wt.Engine) *wt.Module {
	if c == nil {
		return nil
	}
	b, err := os.ReadFile(c.path(digest))
	if err != nil {
		return nil
	}
	payload, ok := unwrapCacheFile(b)
	if !ok {
		return nil
	}
	mod, err := wt.NewModuleDeserialize(eng, payload)
	if err != nil {
		return nil
	}
	return mod
}

// store writes mod to the cache. A failure only costs a compile later.
func (c *diskCache) store(digest string, mod *wt.Module) {
	if c == nil {
		return
	}
	payload, err := mod.Serialize()
	if err != nil {
		return
	}
	_ = c.write(digest, payload)
}

// write writes a serialized module to the cache.
func (c *diskCache) write(digest string, payload []byte) error {
	return c.writeFile(c.path(digest), payload)
}

// writeFile writes payload to path, with the cache's magic and checksum,
// whole or not at all.
func (c *diskCache) writeFile(path string, payload []byte) error {
	f, err := os.CreateTemp(c.dir, ".tmp-*")
	if err != nil {
		return err
	}
	sum := sha256.Sum256(payload)
	_, err = f.Write(append(append([]byte(cacheMagic), sum[:]...), payload...))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// unwrapCacheFile checks a cache file's magic and checksum and returns its
// payload.
func unwrapCacheFile(b []byte) ([]byte, bool) {
	const hdr = len(cacheMagic) + sha256.Size
	if len(b) <= hdr || !bytes.Equal(b[:len(cacheMagic)], []byte(cacheMagic)) {
		return nil, false
	}
	payload := b[hdr:]
	sum := sha256.Sum256(payload)
	if !bytes.Equal(sum[:], b[len(cacheMagic):hdr]) {
		return nil, false
	}
	return payload, true
}

// refusal returns why the module of digest has no snapshot, when a task's
// init showed it.
func (c *diskCache) refusal(digest string) (string, bool) {
	if c == nil {
		return "", false
	}
	b, err := os.ReadFile(strings.TrimSuffix(c.path(digest), ".cwasm") + ".none")
	if err != nil {
		return "", false
	}
	return string(b), true
}

// refuse remembers why the module of digest has no snapshot. A failure
// only costs a task's watched init later.
func (c *diskCache) refuse(digest, why string) {
	if c == nil {
		return
	}
	f, err := os.CreateTemp(c.dir, ".tmp-*")
	if err != nil {
		return
	}
	_, err = f.WriteString(why)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), strings.TrimSuffix(c.path(digest), ".cwasm")+".none")
	}
	if err != nil {
		os.Remove(f.Name())
	}
}

// snapshotPath is where the snapshot of the module of digest is kept, as
// WebAssembly, until its compiled form replaces the module's in the cache.
func (c *diskCache) snapshotPath(digest string) string {
	return strings.TrimSuffix(c.path(digest), ".cwasm") + ".snap"
}

// loadSnapshot returns the kept snapshot of the module of digest.
func (c *diskCache) loadSnapshot(digest string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	b, err := os.ReadFile(c.snapshotPath(digest))
	if err != nil {
		return nil, false
	}
	return unwrapCacheFile(b)
}

// storeSnapshot keeps snap, the snapshot of the module of digest: a
// process that ends before compiling it leaves it to the next. A failure
// only costs a task's init later.
func (c *diskCache) storeSnapshot(digest string, snap []byte) {
	if c != nil {
		_ = c.writeFile(c.snapshotPath(digest), snap)
	}
}

// dropSnapshot forgets the kept snapshot of the module of digest.
func (c *diskCache) dropSnapshot(digest string) {
	if c != nil {
		os.Remove(c.snapshotPath(digest))
	}
}
