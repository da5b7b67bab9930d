//go:build wasmtime

package wasmtime

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	wt "github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/internal/buildstamp"
	"github.com/mandatevm/mandate/sandbox/internal/wasmbin"
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
//   - each file carries a CRC-32C of its payload, checked before the
//     payload reaches wasmtime: a damaged file (a torn write, a flipped
//     bit) is ignored and the module is compiled again and rewritten,
//     never run (a SHA-256 before, which cost a warm "mandate run" more
//     than wasmtime's own load of the file, for no more against damage);
//   - files are written to a temporary name and renamed, so a reader sees
//     a whole file or none.
//
// The checksum guards against damage, not an attacker: anyone who can write
// to the cache directory can make the host run their code, so it must be as
// private as the mandate binary itself.
//
// Beside a module's compiled code, its static counts (wasmbin.Stats, what
// sandbox.StaticLimits bound) are kept in a small file of their own
// (.stats), by the module's digest and the build of this binary
// (buildstamp.Get): a compile checks its limits against them rather than
// reading the whole module again, which was a quarter of a warm run.

// cacheMagic starts every cache file; bump its version when the layout
// changes.
const cacheMagic = "mandate-cwasm-2\n"

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
	// wasmtime copies the code into memory of its own: nothing of the file
	// stays mapped. (Mapped from the file by wasmtime, a warm "mandate
	// run" of a Go guest cost 15-20 ms less CPU, but a cache file damaged
	// in place under a process holding it would kill that process with
	// SIGBUS.)
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
	sum := binary.BigEndian.AppendUint32(nil, crc32.Checksum(payload, cacheCRC))
	return c.writeRaw(path, append(append([]byte(cacheMagic), sum...), payload...))
}

// writeRaw writes b to path, whole or not at all.
func (c *diskCache) writeRaw(path string, b []byte) error {
	f, err := os.CreateTemp(c.dir, ".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
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
	const hdr = len(cacheMagic) + 4
	if len(b) <= hdr || !bytes.Equal(b[:len(cacheMagic)], []byte(cacheMagic)) {
		return nil, false
	}
	payload := b[hdr:]
	if crc32.Checksum(payload, cacheCRC) != binary.BigEndian.Uint32(b[len(cacheMagic):]) {
		return nil, false
	}
	return payload, true
}

var cacheCRC = crc32.MakeTable(crc32.Castagnoli)

// statsFile is what a .stats file holds.
type statsFile struct {
	Stamp string        `json:"stamp"`
	Stats wasmbin.Stats `json:"stats"`
}

// stats returns the static counts kept for the module of digest by this
// build, if any.
func (c *diskCache) stats(digest string) (wasmbin.Stats, bool) {
	if c == nil {
		return wasmbin.Stats{}, false
	}
	b, err := os.ReadFile(strings.TrimSuffix(c.path(digest), ".cwasm") + ".stats")
	if err != nil {
		return wasmbin.Stats{}, false
	}
	payload, ok := unwrapCacheFile(b)
	if !ok {
		return wasmbin.Stats{}, false
	}
	var f statsFile
	if json.Unmarshal(payload, &f) != nil || f.Stamp != buildstamp.Get() {
		return wasmbin.Stats{}, false
	}
	return f.Stats, true
}

// storeStats keeps st, the static counts of the module of digest. A
// failure only costs a scan of the module later.
func (c *diskCache) storeStats(digest string, st wasmbin.Stats) {
	if c == nil {
		return
	}
	if b, err := json.Marshal(statsFile{Stamp: buildstamp.Get(), Stats: st}); err == nil {
		_ = c.writeFile(strings.TrimSuffix(c.path(digest), ".cwasm")+".stats", b)
	}
}

// checkStatic checks wasm, of digest, against l: with its kept counts
// when the cache has them, else counted (and kept), as wasmbin.StaticCache
// does in memory.
func (e *Engine) checkStatic(digest string, wasm []byte, l sandbox.StaticLimits) error {
	if e.cache == nil {
		return e.static.Check(digest, wasm, l)
	}
	if st, ok := e.cache.stats(digest); ok {
		return st.Check(l)
	}
	m, err := wasmbin.Parse(wasm)
	if err != nil {
		return err
	}
	st, err := wasmbin.Static(wasm, m)
	if err != nil {
		return err
	}
	e.cache.storeStats(digest, st)
	return st.Check(l)
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
