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

	"github.com/tetratelabs/wazero/api"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/internal/snapstate"
	"github.com/mandatevm/mandate/sandbox/internal/wasmbin"
)

// Pre-initialised snapshots: a reactor's _initialize (for a Go guest, the
// Go runtime's start and every package's init: most of a task's start)
// runs once per module, and every task after starts from the memory and
// globals it left (wasmbin.ApplySnapshot).
//
// The init that is kept is a task's own: the first task of a module runs
// its _initialize as any task would, in its own instance of the rewritten
// (preemptible) module, under its own timeout and memory limit, so an init
// that never ends is stopped at that task's deadline and one that grows
// memory is refused at that task's limit. Its time is that task's. Only
// when it ended as a snapshot can reproduce it is its state kept:
//
//   - it made no host call into Mandate (a task's authority or input is
//     never part of what another task starts from): every host function
//     marks a call made from a watched _initialize (initWatch), and the
//     module is remembered as one without a snapshot;
//   - it wrote no output (a task started from the snapshot would not
//     write it): remembered too;
//   - no memory growth was refused (the guest saw -1, which a task with
//     another limit would not): the next task tries again;
//   - the module's code changes no table and drops no segment, checked
//     before compiling (wasmbin.ExportGlobals): a snapshot keeps memory and
//     globals only, so a module that could do either gets none.
//
// The task goes on at once; the snapshot is written and compiled in the
// background and installed for the tasks that start after it. It is
// written before it is compiled, so a process that ends sooner (mandate run
// of one task) still leaves it to the next. What init
// read from WASI (random seeds, the clock) is the same in every task of the
// snapshot, and argv is "task" in every task of a module that has or may
// get a snapshot: SECURITY.md says what that means.
//
// Snapshots are kept under Config.CacheDir/snapshots, keyed by the
// original module's digest and the format version, with a SHA-256 of the
// contents checked on every read; a module that cannot be snapshotted is
// remembered there too, with why, so it is not tried again.

var _ sandbox.Snapshotter = (*Module)(nil)

// Snapshot implements sandbox.Snapshotter.
func (m *Module) Snapshot() (used bool, why string) {
	c := m.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.start.Load().snapshot, c.noSnapshot
}

// snapshotVersion changes whenever what a snapshot contains changes.
const snapshotVersion = 2

const snapshotMagic = "MNSNAP1\n"

// snapshotArgv is argv[0] in every task of a module that has or may get a
// snapshot: what init reads of it is kept.
const snapshotArgv = "task"

// snapshotOf returns src (the compile-ready bytes, before the preemption
// rewrite, of c's module) started from its snapshot when the cache has it;
// else a taker, when a task's init may give it one; else why it has none.
func (e *Engine) snapshotOf(c *compiled, src []byte, cfg sandbox.CompileConfig) (snap []byte, t *snapshotTaker, why string) {
	path, refused := e.snapshotPaths(c.digest)
	if path != "" {
		if b, err := readSnapshot(path); err == nil {
			return b, nil, ""
		}
		if why, err := os.ReadFile(refused); err == nil {
			return nil, nil, fmt.Sprintf("%v: %s", wasmbin.ErrNoSnapshot, why)
		}
	}
	variant, globals, err := wasmbin.ExportGlobals(src)
	if err != nil {
		if errors.Is(err, wasmbin.ErrNoSnapshot) {
			writeRefusal(refused, err)
		}
		return nil, nil, err.Error()
	}
	return nil, &snapshotTaker{c: c, src: src, variant: variant, globals: globals, path: path, refused: refused, cfg: cfg, Taker: snapstate.NewTaker()}, ""
}

// writeRefusal remembers, best effort, why a module has no snapshot.
func writeRefusal(path string, why error) {
	if path != "" && os.MkdirAll(filepath.Dir(path), 0o700) == nil {
		_ = writeAtomic(path, []byte(why.Error()))
	}
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
	// src is the module a snapshot applies to; variant is it with its
	// mutable globals exported (what tasks run until the snapshot is
	// installed), and globals its globals.
	src, variant []byte
	globals      []wasmbin.Global
	path         string // the snapshot's cache file; "" without a cache
	refused      string // the refusal's cache file; "" without a cache
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
	writeRefusal(t.refused, why)
	t.Close()
}

// take keeps inst's state, just after its _initialize returned without an
// error, as the module's snapshot when the init was one a snapshot
// reproduces (see the top of this file) and no other task's is kept.
func (t *snapshotTaker) take(inst api.Module, w *initWatch, lim *memoryLimiter) {
	switch {
	case !t.open():
		return
	case w.touched.Load() != nil:
		t.refuse(fmt.Errorf("%w: _initialize calls %s (a task's authority or input is never part of a snapshot)", wasmbin.ErrNoSnapshot, *w.touched.Load()))
		return
	case w.Wrote():
		t.refuse(fmt.Errorf("%w: _initialize writes output (a task started from a snapshot would not)", wasmbin.ErrNoSnapshot))
		return
	case lim != nil && lim.refused.Load():
		return // this task's limit refused a growth; another's may not
	case !t.Claim():
		return
	}
	mem := inst.Memory()
	if mem == nil {
		t.refuse(fmt.Errorf("%w: no memory", wasmbin.ErrNoSnapshot))
		return
	}
	view, ok := mem.Read(0, mem.Size())
	if !ok {
		t.refuse(fmt.Errorf("%w: memory unreadable", wasmbin.ErrNoSnapshot))
		return
	}
	image := bytes.Clone(view)
	vals := make([]uint64, len(t.globals))
	for i, g := range t.globals {
		if !g.Mutable {
			continue
		}
		x := inst.ExportedGlobal(wasmbin.SnapshotGlobalExport(i))
		if x == nil {
			t.refuse(fmt.Errorf("%w: global %d not exported", wasmbin.ErrNoSnapshot, i))
			return
		}
		vals[i] = x.Get()
	}
	e := t.c.eng
	if !e.goBackground(func(ctx context.Context) { t.install(ctx, image, vals) }) {
		t.Close()
	}
}

// install writes the snapshot of image and vals, compiles it and makes it
// the form the module's next tasks start from.
func (t *snapshotTaker) install(ctx context.Context, image []byte, vals []uint64) {
	defer t.Close()
	e := t.c.eng
	snap, err := wasmbin.ApplySnapshot(t.src, image, vals)
	if err != nil {
		t.refuse(err)
		return
	}
	sb, err := wasmbin.Parse(snap)
	if err != nil {
		t.refuse(fmt.Errorf("%w: %v", wasmbin.ErrNoSnapshot, err))
		return
	}
	compiled, mapped, _ := e.splitImage(snap)
	installed := false
	defer func() {
		if !installed && mapped != nil {
			mapped.close()
		}
	}()
	rewritten, err := e.rewrite(compiled)
	if err != nil {
		t.refuse(fmt.Errorf("%w: %v", wasmbin.ErrNoSnapshot, err))
		return
	}
	// Kept before it is compiled: a process that ends sooner (mandate run
	// of one task) still leaves it to the next, which compiles it. Best
	// effort: a cache that cannot be written costs the next process
	// another init, nothing more.
	if t.path != "" && os.MkdirAll(filepath.Dir(t.path), 0o700) == nil {
		sum := sha256.Sum256(snap)
		_ = writeAtomic(t.path, append(append([]byte(snapshotMagic), sum[:]...), snap...))
	}
	// The same code as the module's, bounded as its compile was.
	cm, err := e.compileBounded(ctx, e.rt, e.opt.preempt == preemptCloseOnDone, rewritten, sandbox.CompileConfig{Limits: t.cfg.Limits, MemoryLimit: t.cfg.MemoryLimit})
	if err != nil {
		if ctx.Err() == nil {
			// Not a snapshot any process should compile again.
			if t.path != "" {
				os.Remove(t.path)
			}
			t.refuse(fmt.Errorf("%w: compiling the snapshot: %v", wasmbin.ErrNoSnapshot, err))
		}
		return
	}
	installed = t.c.install(&startForm{cm: cm, memMin: sb.MemMin << 16, snapshot: true, image: mapped})
	if !installed {
		cm.Close(context.Background())
	}
}

// initWatch is the context a watched _initialize runs with: every host
// function notes a call made under it, and the task's output writers
// (Output.Writer) note a write.
type initWatch struct {
	context.Context
	snapstate.Output
	touched atomic.Pointer[string] // the first host function called
}

func (w *initWatch) touch(fn string) { w.touched.CompareAndSwap(nil, &fn) }
