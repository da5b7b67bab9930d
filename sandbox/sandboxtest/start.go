package sandboxtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/wasmasm"
	"github.com/mandatevm/mandate/sandbox"
)

// Modules whose _initialize is hostile, for the start of a task: a
// snapshot's init must run inside the task's limits and be stoppable, and
// a task started from a snapshot must behave as one that ran _initialize.

// initModule assembles a reactor with one page of memory (exported), whose
// _initialize is function 0 with body initCode, whose "run" (() -> i32) is
// function 1 with body runCode, and extra functions after them. Types:
// 0 () -> (), 1 () -> i32, 2 (i32) -> (). table, when set, is the table
// section's payload; elem, the element section's.
func initModule(initCode, runCode []byte, extra [][2][]byte, table, elem []byte) []byte {
	funcs := [][]byte{{0x00}, {0x01}}
	bodies := [][]byte{body(nil, initCode), body(nil, runCode)}
	for _, f := range extra { // {type index, body}
		funcs = append(funcs, f[0])
		bodies = append(bodies, body(nil, f[1]))
	}
	secs := [][]byte{
		wasmasm.Section(1, wasmasm.Vec(
			[]byte{0x60, 0x00, 0x00},
			[]byte{0x60, 0x00, 0x01, 0x7f},
			[]byte{0x60, 0x01, 0x7f, 0x00},
		)),
		wasmasm.Section(3, wasmasm.Vec(funcs...)),
	}
	if table != nil {
		secs = append(secs, wasmasm.Section(4, table))
	}
	secs = append(secs,
		wasmasm.Section(5, []byte{0x01, 0x00, 0x01}), // memory 0: min 1 page
		wasmasm.Section(7, wasmasm.Vec(
			wasmasm.Cat(wasmasm.Name("memory"), []byte{0x02, 0x00}),
			wasmasm.Cat(wasmasm.Name("_initialize"), []byte{0x00, 0x00}),
			wasmasm.Cat(wasmasm.Name("run"), []byte{0x00, 0x01}),
		)),
	)
	if elem != nil {
		secs = append(secs, wasmasm.Section(9, elem))
	}
	var code [][]byte
	for _, b := range bodies {
		code = append(code, wasmasm.Cat(wasmasm.Uleb(uint64(len(b))), b))
	}
	secs = append(secs, wasmasm.Section(10, wasmasm.Vec(code...)))
	return wasmasm.Module(secs...)
}

// body is a function body: its locals' declarations (nil: none) and code.
func body(locals, code []byte) []byte {
	if locals == nil {
		locals = []byte{0x00}
	}
	return wasmasm.Cat(locals, code, []byte{0x0b})
}

// FanoutInitModule is a reactor whose _initialize is a recursion without
// a loop: f(60), where f(n) calls f(n-1) twice, about 2^61 calls with the
// stack never deeper than 61 frames. Only a check at function entry stops
// it.
func FanoutInitModule() []byte {
	f := []byte{
		0x20, 0x00, 0x04, 0x40, // local.get 0; if
		0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, 0x02, // f(n-1)
		0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, 0x02, // f(n-1)
		0x0b, // end
	}
	return initModule(
		[]byte{0x41, 60, 0x10, 0x02}, // f(60)
		[]byte{0x41, 0x00},
		[][2][]byte{{{0x02}, f}}, nil, nil)
}

// LoopInitModule is a reactor whose _initialize loops forever.
func LoopInitModule() []byte {
	return initModule([]byte{0x03, 0x40, 0x0c, 0x00, 0x0b}, []byte{0x41, 0x00}, nil, nil, nil)
}

// GreedyInitModule is a reactor whose _initialize grows its memory a page
// at a time until a growth is refused; "run" returns the memory's size in
// pages, so a task's exit code says how far its init got.
func GreedyInitModule() []byte {
	return initModule(
		[]byte{0x03, 0x40, 0x41, 0x01, 0x40, 0x00, 0x41, 0x7f, 0x47, 0x0d, 0x00, 0x0b}, // loop: memory.grow 1 != -1: br_if
		[]byte{0x3f, 0x00}, // memory.size
		nil, nil, nil)
}

// TableInitModule is a reactor whose _initialize sets slot 0 of its table
// to a function returning 42, and whose "run" calls slot 0: 42 (an
// *ExitError with Code 42) in every task, as for a module run plainly.
func TableInitModule() []byte {
	return initModule(
		[]byte{0x41, 0x00, 0xd2, 0x02, 0x26, 0x00},  // i32.const 0; ref.func 2; table.set 0
		[]byte{0x41, 0x00, 0x11, 0x01, 0x00},        // i32.const 0; call_indirect (type 1) table 0
		[][2][]byte{{{0x01}, {0x41, 42}}},           // func 2: () -> 42
		wasmasm.Vec([]byte{0x70, 0x00, 0x01}),       // funcref table: min 1
		wasmasm.Vec([]byte{0x03, 0x00, 0x01, 0x02}), // declarative: func 2
	)
}

// RefusedInitGrowthModule is a reactor whose _initialize asks for 2^16
// more pages (refused under any limit) and whose "run" returns 7 without
// growing anything.
func RefusedInitGrowthModule() []byte {
	return initModule(
		[]byte{0x41, 0x80, 0x80, 0x04, 0x40, 0x00, 0x1a}, // i32.const 65536; memory.grow; drop
		[]byte{0x41, 0x07},
		nil, nil, nil)
}

// Settled waits while m's snapshot is being made from a task's init (an
// engine's module says so with SnapshotPending: the claimed init is
// applied and compiled in the background), and returns whether m has a
// snapshot, or why not. A module whose snapshot is still open (no task's
// init was kept yet) returns at once.
func Settled(t testing.TB, m sandbox.Module) (used bool, why string) {
	t.Helper()
	s, ok := m.(sandbox.Snapshotter)
	if !ok {
		return false, ""
	}
	p, ok := m.(interface{ SnapshotPending() bool })
	deadline := time.Now().Add(time.Minute)
	for ok && p.SnapshotPending() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	return s.Snapshot()
}

// testInitStopped: a hostile _initialize ends at the task's deadline and
// is bounded by its memory limit, in the first task and in every other.
func (s *suite) testInitStopped(t *testing.T) {
	for _, cfg := range []sandbox.Config{{}, {CacheDir: t.TempDir()}} {
		e, _ := s.engine(t, cfg)
		for _, tc := range []struct {
			name string
			wasm []byte
		}{{"fanout", FanoutInitModule()}, {"loop", LoopInitModule()}} {
			m := compileBytes(t, e, tc.name, tc.wasm)
			for i := range 2 {
				start := time.Now()
				err := m.Run(context.Background(), sandbox.RunConfig{Timeout: 500 * time.Millisecond})
				if !errors.Is(err, sandbox.ErrTimeout) {
					t.Fatalf("%s init, run %d: %v, want ErrTimeout", tc.name, i, err)
				}
				t.Logf("%s init, run %d: stopped after %v (timeout 500ms)", tc.name, i, time.Since(start).Round(time.Millisecond))
			}
			// Canceled, not only timed out.
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			if err := m.Run(ctx, sandbox.RunConfig{}); !errors.Is(err, sandbox.ErrCanceled) {
				t.Fatalf("%s init canceled: %v, want ErrCanceled", tc.name, err)
			}
		}
		// An init that takes what memory it can takes the task's limit,
		// not a snapshot's own bound: 16 MiB, 256 pages.
		m := compileBytes(t, e, "greedy", GreedyInitModule())
		for i := range 3 {
			err := m.Run(context.Background(), sandbox.RunConfig{MemoryLimit: 16 << 20, Timeout: time.Minute})
			var ee *sandbox.ExitError
			if !errors.As(err, &ee) || ee.Code != 256 {
				t.Fatalf("greedy init, run %d: %v, want exit code 256 (pages in 16 MiB)", i, err)
			}
		}
		err := m.Run(context.Background(), sandbox.RunConfig{MemoryLimit: 32 << 20, Timeout: time.Minute})
		var ee *sandbox.ExitError
		if !errors.As(err, &ee) || ee.Code != 512 {
			t.Fatalf("greedy init under 32 MiB: %v, want exit code 512", err)
		}
	}
}

// testSnapshotEquivalent: a task started from a snapshot behaves as one
// that ran _initialize, the first task's and every later one's.
func (s *suite) testSnapshotEquivalent(t *testing.T) {
	e, _ := s.engine(t, sandbox.Config{CacheDir: t.TempDir()})
	// A table set by init.
	m := compileBytes(t, e, "table-init", TableInitModule())
	for i := range 3 {
		err := m.Run(context.Background(), sandbox.RunConfig{Timeout: time.Minute})
		var ee *sandbox.ExitError
		if !errors.As(err, &ee) || ee.Code != 42 || ee.Err != nil {
			t.Fatalf("table-init run %d: %v, want exit code 42", i, err)
		}
		used, why := Settled(t, m)
		t.Logf("table-init run %d: snapshot %v (%s)", i, used, why)
	}
	// A growth refused in init: every task sees what the first saw.
	m = compileBytes(t, e, "refused-init-growth", RefusedInitGrowthModule())
	var first error
	for i := range 3 {
		err := m.Run(context.Background(), sandbox.RunConfig{MemoryLimit: 16 << 20, Timeout: time.Minute})
		var ee *sandbox.ExitError
		if !errors.As(err, &ee) || ee.Code != 7 {
			t.Fatalf("refused-init-growth run %d: %v, want exit code 7", i, err)
		}
		if i == 0 {
			first = err
		} else if err.Error() != first.Error() || errors.Is(err, sandbox.ErrMemoryLimit) != errors.Is(first, sandbox.ErrMemoryLimit) {
			t.Fatalf("refused-init-growth run %d: %v; the first run: %v", i, err, first)
		}
		if s, ok := m.(sandbox.Snapshotter); ok {
			used, why := s.Snapshot() // a refused growth may leave it open
			t.Logf("refused-init-growth run %d: snapshot %v (%s)", i, used, why)
		}
	}
}

// testSnapshotKeptAtClose: an engine closed right after a module's first
// task (mandate run of one task) still leaves the snapshot that task's
// init gave, and the next engine on the same cache starts from it at once.
func (s *suite) testSnapshotKeptAtClose(t *testing.T) {
	dir := t.TempDir()
	e, _ := s.engine(t, sandbox.Config{CacheDir: dir})
	m := compile(t, e, "reactor")
	if err := m.Run(context.Background(), sandbox.RunConfig{Entry: "noop", Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	m.Close(context.Background())
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	e2, _ := s.engine(t, sandbox.Config{CacheDir: dir})
	m2 := compile(t, e2, "reactor")
	used, why := m2.(sandbox.Snapshotter).Snapshot()
	if !used {
		t.Fatalf("the next engine has no snapshot: %q", why)
	}
	if err := m2.Run(context.Background(), sandbox.RunConfig{Entry: "noop", Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
}
