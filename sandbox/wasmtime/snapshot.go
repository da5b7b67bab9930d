//go:build wasmtime

package wasmtime

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"time"

	wt "github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/internal/wasmbin"
)

// Pre-initialised snapshots, as sandbox/wazero takes them (see its
// snapshot.go and wasmbin.ApplySnapshot): a reactor's _initialize runs once
// per module, in a store of its own where every host function registered
// with Host traps and marks the run (a module calling into Mandate during
// init gets no snapshot), and the module is rewritten to start from the
// memory and globals init left. Only the rewritten module is compiled and
// cached (the compilation cache keys it by the original module's digest,
// with snapshots in its configuration); wasmtime then initialises each
// task's memory from the module's data, copy-on-write where it can.

// Bounds of a snapshot's init, as on wazero.
const (
	snapshotMemoryLimit = 256 << 20
	snapshotTimeout     = 30 * time.Second
)

// snapshotRun marks a run that takes a snapshot: touched names the first
// host function init called.
type snapshotRun struct{ touched string }

var _ sandbox.Snapshotter = (*Module)(nil)

// Snapshot implements sandbox.Snapshotter.
func (m *Module) Snapshot() (used bool, why string) { return m.c.snapshot, m.c.noSnapshot }

// takeSnapshot runs src's _initialize once, host calls refused, and
// returns the module starting where it ended.
func (e *Engine) takeSnapshot(src []byte) ([]byte, error) {
	variant, globals, err := wasmbin.ExportGlobals(src)
	if err != nil {
		return nil, err
	}
	mod, err := wt.NewModule(e.wt, variant)
	if err != nil {
		return nil, fmt.Errorf("%w: compiling: %v", wasmbin.ErrNoSnapshot, err)
	}
	defer mod.Close()
	ctx, cancel := context.WithTimeout(e.closeCtx, snapshotTimeout)
	defer cancel()
	snap := &snapshotRun{}
	// argv is the same for every task of the snapshot.
	r := &run{ctx: ctx, name: "task", stdout: io.Discard, stderr: io.Discard, start: e.start, snapshot: snap}
	store := wt.NewStore(e.wt)
	defer store.Close()
	unregister := register(store, r)
	defer unregister()
	store.Limiter(snapshotMemoryLimit, math.MaxInt32, 1, 64, 1)
	switch e.opt.preempt {
	case preemptEpoch:
		stop := watchEpoch(store, e.wt, ctx)
		defer stop()
	case preemptFuel:
		if err := store.SetFuel(math.MaxUint64); err != nil {
			return nil, err
		}
	}
	inst, err := e.linker.Instantiate(store, mod)
	if err != nil {
		return nil, fmt.Errorf("%w: instantiating: %v", wasmbin.ErrNoSnapshot, err)
	}
	r.lookUpMemory(store, inst)
	f := inst.GetFunc(store, "_initialize")
	if f == nil {
		return nil, fmt.Errorf("%w: no _initialize", wasmbin.ErrNoSnapshot)
	}
	if _, err := f.Call(store); err != nil || snap.touched != "" || r.exited {
		if snap.touched != "" {
			return nil, fmt.Errorf("%w: _initialize calls %s (a task's authority or input is never part of a snapshot)", wasmbin.ErrNoSnapshot, snap.touched)
		}
		return nil, fmt.Errorf("%w: _initialize failed: %v", wasmbin.ErrNoSnapshot, err)
	}
	ext := inst.GetExport(store, "memory")
	if ext == nil || ext.Memory() == nil {
		return nil, fmt.Errorf("%w: no exported memory", wasmbin.ErrNoSnapshot)
	}
	mem := ext.Memory()
	image := bytes.Clone(mem.UnsafeData(store))
	vals := make([]uint64, len(globals))
	for i, g := range globals {
		if !g.Mutable {
			continue
		}
		x := inst.GetExport(store, wasmbin.SnapshotGlobalExport(i))
		if x == nil || x.Global() == nil {
			return nil, fmt.Errorf("%w: global %d not exported", wasmbin.ErrNoSnapshot, i)
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
			return nil, fmt.Errorf("%w: global %d of kind %v", wasmbin.ErrNoSnapshot, i, v.Kind())
		}
	}
	return wasmbin.ApplySnapshot(src, image, vals)
}
