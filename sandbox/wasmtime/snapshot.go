//go:build wasmtime

package wasmtime

import (
	"bytes"
	"fmt"
	"math"

	wt "github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/internal/snapstate"
	"github.com/mandatevm/mandate/sandbox/internal/wasmbin"
)

// Pre-initialised snapshots, as sandbox/wazero takes them (see its
// snapshot.go for the rules and wasmbin.ApplySnapshot): the first task of a
// reactor runs its _initialize in its own store, under its own limits and
// preemption, watched; when that init made no host call, wrote no output
// and was refused no memory growth (the growth-tracking global of
// wasmbin.TrackGrowth is still zero, so a refusal is never part of a
// snapshot), the memory and globals it left become the module that later
// tasks start from. The snapshot is compiled in the background and stored
// in the compilation cache under the original module's digest (the cache
// directory's key includes whether snapshots are on), replacing the
// compiled module that exports its globals. The snapshot itself, as
// WebAssembly, is kept there first (a ".snap" file), so that a process
// that ends before compiling it (mandate run of one task) leaves it to the
// next, which compiles it; a module that can not be snapshotted is
// remembered there with why (a ".none" file). wasmtime then
// initialises each task's memory from the module's data, copy-on-write
// where it can.

// snapshotArgv is argv[0] in every task of a module that has or may get a
// snapshot: what init reads of it is kept.
const snapshotArgv = "task"

var _ sandbox.Snapshotter = (*Module)(nil)

// Snapshot implements sandbox.Snapshotter.
func (m *Module) Snapshot() (used bool, why string) {
	c := m.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.start.Load().snapshot, c.noSnapshot
}

// SnapshotPending reports whether a task's init is being made the
// module's snapshot (taken, not yet installed), for tests.
func (m *Module) SnapshotPending() bool {
	t := m.c.taker
	return t != nil && t.Pending()
}

// snapshotTaker keeps the first clean _initialize of a module's tasks as
// the module's snapshot.
type snapshotTaker struct {
	*snapstate.Taker
	c *compiled
	// src is the module a snapshot applies to (as prepared for compiling,
	// its globals not exported), and globals its globals.
	src     []byte
	globals []wasmbin.Global
	// cfg bounded the module's compile; its memory bounds the snapshot's
	// (the same code compiled within it), not its time: the snapshot is
	// compiled in the background, no task waiting for it.
	cfg sandbox.CompileConfig
}

// open reports whether a task's init may still give the snapshot.
func (t *snapshotTaker) open() bool { return t != nil && t.Open() }

// refuse closes t for good: the module has no snapshot, for why.
func (t *snapshotTaker) refuse(why error) {
	t.c.mu.Lock()
	t.c.noSnapshot = why.Error()
	t.c.mu.Unlock()
	t.c.eng.cache.refuse(t.c.digest, why.Error())
	t.Close()
}

// take keeps inst's state, just after its _initialize returned, as the
// module's snapshot when the init was one a snapshot reproduces and no
// other task's is kept.
func (t *snapshotTaker) take(store *wt.Store, inst *wt.Instance, w *initWatch) {
	switch {
	case !t.open():
		return
	case w.touched != "":
		t.refuse(fmt.Errorf("%w: _initialize calls %s (a task's authority or input is never part of a snapshot)", wasmbin.ErrNoSnapshot, w.touched))
		return
	case w.Wrote():
		t.refuse(fmt.Errorf("%w: _initialize writes output (a task started from a snapshot would not)", wasmbin.ErrNoSnapshot))
		return
	case growthRefused(store, inst):
		return // a growth was refused; another task's init may not be
	case !t.Claim():
		return
	}
	ext := inst.GetExport(store, "memory")
	if ext == nil || ext.Memory() == nil {
		t.refuse(fmt.Errorf("%w: no exported memory", wasmbin.ErrNoSnapshot))
		return
	}
	image := bytes.Clone(ext.Memory().UnsafeData(store))
	vals := make([]uint64, len(t.globals))
	for i, g := range t.globals {
		if !g.Mutable {
			continue
		}
		x := inst.GetExport(store, wasmbin.SnapshotGlobalExport(i))
		if x == nil || x.Global() == nil {
			t.refuse(fmt.Errorf("%w: global %d not exported", wasmbin.ErrNoSnapshot, i))
			return
		}
		v := x.Global().Get(store)
		switch v.Kind() {
		case wt.KindI32:
			vals[i] = uint64(uint32(v.I32()))
		case wt.KindI64:
			vals[i] = uint64(v.I64())
		case wt.KindF32:
			vals[i] = uint64(math.Float32bits(v.F32()))
		case wt.KindF64:
			vals[i] = math.Float64bits(v.F64())
		default:
			t.refuse(fmt.Errorf("%w: global %d of kind %v", wasmbin.ErrNoSnapshot, i, v.Kind()))
			return
		}
	}
	if !t.c.eng.goBackground(func() { t.install(image, vals) }) {
		t.Close()
	}
}

// growthRefused reports whether a memory.grow of inst was refused: the
// global wasmbin.TrackGrowth adds is not zero.
func growthRefused(store *wt.Store, inst *wt.Instance) bool {
	ext := inst.GetExport(store, wasmbin.GrowthExport)
	return ext != nil && ext.Global() != nil && ext.Global().Get(store).I64() != 0
}

// install compiles the snapshot of image and vals, stores it in the cache
// and makes it the form the module's next tasks start from.
func (t *snapshotTaker) install(image []byte, vals []uint64) {
	defer t.Close()
	e := t.c.eng
	snap, err := wasmbin.ApplySnapshot(t.src, image, vals)
	if err != nil {
		t.refuse(err)
		return
	}
	// Kept before it is compiled: a process that ends sooner (mandate run
	// of one task) leaves it to the next, which compiles it.
	e.cache.storeSnapshot(t.c.digest, snap)
	// The same code as the module's, bounded as its compile was; stored
	// in the cache in the place of the module that exports its globals.
	mod, err := e.compileBounded(e.closeCtx, t.c.digest, snap, sandbox.CompileConfig{Limits: t.cfg.Limits, MemoryLimit: t.cfg.MemoryLimit})
	if err != nil {
		if e.closeCtx.Err() == nil {
			// Not a snapshot any process should compile again.
			e.cache.dropSnapshot(t.c.digest)
			t.refuse(fmt.Errorf("%w: compiling the snapshot: %v", wasmbin.ErrNoSnapshot, err))
		}
		return
	}
	f := &startForm{mod: mod, memMin: memoryMin(mod, 0), snapshot: true}
	if !t.c.install(f) {
		mod.Close()
	}
}

// initWatch notes, while a task's _initialize runs, a host call and
// (through Output.Writer) a write of output. A run's calls never overlap:
// touched needs no lock.
type initWatch struct {
	snapstate.Output
	touched string // the first host function called
}

func (w *initWatch) touch(fn string) {
	if w.touched == "" {
		w.touched = fn
	}
}
