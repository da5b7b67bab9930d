package wazero

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/internal/wasmbin"
)

// Pre-initialised snapshots: a reactor's _initialize (for a Go guest, the
// Go runtime's start and every package's init: most of a task's start) runs
// once per module, and every task starts from the memory and globals it
// left (wasmbin.ApplySnapshot). Init runs in an instance of its own
// runtime, where every function of a host module registered with Host
// traps and marks the module: a module that calls into Mandate during init
// (reads its input, looks up a capability) gets no snapshot, so no task
// ever starts with what another task was given. What init read from WASI
// (random seeds, the clock, argv) is the same in every task of the
// snapshot: SECURITY.md says what that means.
//
// Snapshots are kept under Config.CacheDir/snapshots, keyed by the
// original module's digest and the format version, with a SHA-256 of the
// contents checked on every read; a module that cannot be snapshotted is
// remembered there too, with why, so it is not tried again.

var _ sandbox.Snapshotter = (*Module)(nil)

// Snapshot implements sandbox.Snapshotter.
func (m *Module) Snapshot() (used bool, why string) { return m.c.snapshot, m.c.noSnapshot }

// snapshotVersion changes whenever what a snapshot contains changes.
const snapshotVersion = 1

// Bounds of a snapshot's init: more than this and the module starts
// without a snapshot.
const (
	snapshotMemoryLimit = 256 << 20
	snapshotTimeout     = 30 * time.Second
)

const snapshotMagic = "MNSNAP1\n"

// errInitHostCall is the trap of a host call made during a snapshot's init.
var errInitHostCall = errors.New("a host call during init")

// snapshotOf returns src (the compile-ready bytes of the module with
// digest) started from its snapshot, or an error saying why it has none.
func (e *Engine) snapshotOf(ctx context.Context, digest string, src []byte) ([]byte, error) {
	path, refused := e.snapshotPaths(digest)
	if path != "" {
		if b, err := readSnapshot(path); err == nil {
			return b, nil
		}
		if why, err := os.ReadFile(refused); err == nil {
			return nil, fmt.Errorf("%w: %s", wasmbin.ErrNoSnapshot, why)
		}
	}
	snap, err := e.takeSnapshot(ctx, src)
	if path == "" || ctx.Err() != nil {
		return snap, err
	}
	// Best effort: a cache that cannot be written costs the next process
	// another init, nothing more.
	if os.MkdirAll(filepath.Dir(path), 0o700) == nil {
		switch {
		case err == nil:
			sum := sha256.Sum256(snap)
			_ = writeAtomic(path, append(append([]byte(snapshotMagic), sum[:]...), snap...))
		case errors.Is(err, wasmbin.ErrNoSnapshot):
			_ = writeAtomic(refused, []byte(err.Error()))
		}
	}
	return snap, err
}

func (e *Engine) snapshotPaths(digest string) (snap, refused string) {
	if e.cacheDir == "" {
		return "", ""
	}
	base := filepath.Join(e.cacheDir, "snapshots", fmt.Sprintf("v%d-%s", snapshotVersion, strings.TrimPrefix(digest, "sha256:")))
	return base + ".wasm", base + ".none"
}

// readSnapshot reads a snapshot file, checking its sum.
func readSnapshot(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	n := len(snapshotMagic) + sha256.Size
	if len(b) < n || string(b[:len(snapshotMagic)]) != snapshotMagic {
		return nil, fmt.Errorf("%s: not a snapshot", path)
	}
	sum := sha256.Sum256(b[n:])
	if !bytes.Equal(sum[:], b[len(snapshotMagic):n]) {
		os.Remove(path)
		return nil, fmt.Errorf("%s: damaged (its sum does not match; removed)", path)
	}
	return b[n:], nil
}

func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".snap-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// takeSnapshot runs src's _initialize once, host calls refused, and
// returns the module starting where it ended.
func (e *Engine) takeSnapshot(ctx context.Context, src []byte) ([]byte, error) {
	variant, globals, err := wasmbin.ExportGlobals(src)
	if err != nil {
		return nil, err
	}
	rc := wazero.NewRuntimeConfig().WithCloseOnContextDone(true)
	if e.cache != nil {
		rc = rc.WithCompilationCache(e.cache)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	defer rt.Close(context.Background())
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return nil, err
	}
	var touched atomic.Value // the host function called during init
	for mod, fns := range e.imports {
		if mod == wasiModule {
			continue
		}
		b := rt.NewHostModuleBuilder(mod)
		for name, sig := range fns {
			call := mod + "." + name
			b = b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {
				touched.CompareAndSwap(nil, call)
				panic(errInitHostCall)
			}), []api.ValueType(sig.params), []api.ValueType(sig.results)).Export(name)
		}
		if _, err := b.Instantiate(ctx); err != nil {
			return nil, err
		}
	}
	cm, err := rt.CompileModule(ctx, variant)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	defer cancel()
	lim := &memoryLimiter{limit: snapshotMemoryLimit}
	runCtx = experimental.WithMemoryAllocator(runCtx, lim)
	// argv is the same for every task of the snapshot.
	inst, err := instantiate(runCtx, rt, cm, baseConfig.WithName("snapshot").WithArgs("task"))
	if err != nil {
		return nil, fmt.Errorf("%w: instantiating: %v", wasmbin.ErrNoSnapshot, err)
	}
	defer inst.Close(context.Background())
	if _, err := inst.ExportedFunction("_initialize").Call(runCtx); err != nil {
		if call, ok := touched.Load().(string); ok {
			return nil, fmt.Errorf("%w: _initialize calls %s (a task's authority or input is never part of a snapshot)", wasmbin.ErrNoSnapshot, call)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: _initialize failed: %v", wasmbin.ErrNoSnapshot, err)
	}
	mem := inst.Memory()
	if mem == nil {
		return nil, fmt.Errorf("%w: no memory", wasmbin.ErrNoSnapshot)
	}
	view, ok := mem.Read(0, mem.Size())
	if !ok {
		return nil, fmt.Errorf("%w: memory unreadable", wasmbin.ErrNoSnapshot)
	}
	image := bytes.Clone(view)
	vals := make([]uint64, len(globals))
	for i, g := range globals {
		if !g.Mutable {
			continue
		}
		x := inst.ExportedGlobal(wasmbin.SnapshotGlobalExport(i))
		if x == nil {
			return nil, fmt.Errorf("%w: global %d not exported", wasmbin.ErrNoSnapshot, i)
		}
		vals[i] = x.Get()
	}
	return wasmbin.ApplySnapshot(src, image, vals)
}
