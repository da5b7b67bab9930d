package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/wasmasm"
	"github.com/mandatevm/mandate/sandbox"
)

// SnapshotModule assembles, from fuzz bytes, a reactor whose _initialize
// writes memory, sets globals and table slots, grows memory and drops
// segments, and whose "run" returns a fingerprint of all of it (never 0,
// so every run ends in an *ExitError carrying it) and then traps when a
// segment it uses was dropped. A start from a snapshot must give exactly
// what a start that runs _initialize gives.
//
// The module has one memory (1 page, at most 8), four mutable i32
// globals, a funcref table of two slots (an active segment puts functions
// 2 and 3 there), a passive element segment (function 4), and with
// dataDrop a passive data segment and a DataCount section. Each op of
// init is three bytes of b: what, and two operands.
func SnapshotModule(b []byte) []byte {
	dataDrop := len(b) > 0 && b[0]&1 == 1
	var init []byte
	for i := 1; i+2 < len(b) && i < 1+3*32; i += 3 {
		x, y := b[i+1], b[i+2]
		switch b[i] % 6 {
		case 0: // i32.store at one of 8 words
			init = wasmasm.Cat(init, []byte{0x41}, wasmasm.Sleb(int64(x%8)*4), []byte{0x41}, wasmasm.Sleb(int64(y)), []byte{0x36, 0x02, 0x00})
		case 1: // global.set
			init = wasmasm.Cat(init, []byte{0x41}, wasmasm.Sleb(int64(y)), []byte{0x24, x % 4})
		case 2: // table.set slot to function 2..4
			init = wasmasm.Cat(init, []byte{0x41, x % 2, 0xd2, 2 + y%3, 0x26, 0x00})
		case 3: // memory.grow (0..3 pages, refused past the maximum)
			init = wasmasm.Cat(init, []byte{0x41, x % 4, 0x40, 0x00, 0x1a})
		case 4: // elem.drop 1
			init = wasmasm.Cat(init, []byte{0xfc, 0x0d, 0x01})
		case 5: // data.drop 0, or a store past the first page when it grew
			if dataDrop {
				init = wasmasm.Cat(init, []byte{0xfc, 0x09, 0x00})
			} else {
				init = wasmasm.Cat(init, []byte{0x3f, 0x00, 0x41, 0x01, 0x4b, 0x04, 0x40, 0x41}, wasmasm.Sleb(1<<16+int64(x)*4), []byte{0x41}, wasmasm.Sleb(int64(y)), []byte{0x36, 0x02, 0x00, 0x0b})
			}
		}
	}
	// run: fp = fp*31 + each word, global, memory.size and slot.
	var run []byte
	push := func(value []byte) { // fp = value + fp*31
		run = wasmasm.Cat(run, value, []byte{0x20, 0x00, 0x41, 31, 0x6c, 0x6a, 0x21, 0x00})
	}
	for w := range 8 {
		push(wasmasm.Cat([]byte{0x41}, wasmasm.Sleb(int64(w)*4), []byte{0x28, 0x02, 0x00}))
	}
	for g := range 4 {
		push([]byte{0x23, byte(g)})
	}
	push([]byte{0x3f, 0x00})
	for slot := range 2 {
		push([]byte{0x41, byte(slot), 0x11, 0x01, 0x00})
	}
	run = wasmasm.Cat(run,
		[]byte{0x41, 0x00, 0x41, 0x00, 0x41, 0x01, 0xfc, 0x0c, 0x01, 0x00}, // table.init 1: traps when dropped
	)
	if dataDrop {
		run = wasmasm.Cat(run, []byte{0x41, 0x00, 0x41, 0x00, 0x41, 0x01, 0xfc, 0x08, 0x00, 0x00}) // memory.init 0
	}
	run = wasmasm.Cat(run, []byte{0x20, 0x00, 0x41, 0x01, 0x72}) // fp | 1

	constFn := func(v byte) []byte { return body(nil, []byte{0x41, v}) }
	bodies := [][]byte{
		body(nil, init),
		body([]byte{0x01, 0x01, 0x7f}, run), // one i32 local: fp
		constFn(11), constFn(22), constFn(33),
	}
	var code [][]byte
	for _, bd := range bodies {
		code = append(code, wasmasm.Cat(wasmasm.Uleb(uint64(len(bd))), bd))
	}
	globals := make([][]byte, 4)
	for i := range globals {
		globals[i] = []byte{0x7f, 0x01, 0x41, byte(i), 0x0b}
	}
	secs := [][]byte{
		wasmasm.Section(1, wasmasm.Vec([]byte{0x60, 0x00, 0x00}, []byte{0x60, 0x00, 0x01, 0x7f})),
		wasmasm.Section(3, wasmasm.Vec([]byte{0x00}, []byte{0x01}, []byte{0x01}, []byte{0x01}, []byte{0x01})),
		wasmasm.Section(4, wasmasm.Vec([]byte{0x70, 0x00, 0x02})), // funcref, min 2
		wasmasm.Section(5, []byte{0x01, 0x01, 0x01, 0x08}),        // memory: 1 page, at most 8
		wasmasm.Section(6, wasmasm.Vec(globals...)),
		wasmasm.Section(7, wasmasm.Vec(
			wasmasm.Cat(wasmasm.Name("memory"), []byte{0x02, 0x00}),
			wasmasm.Cat(wasmasm.Name("_initialize"), []byte{0x00, 0x00}),
			wasmasm.Cat(wasmasm.Name("run"), []byte{0x00, 0x01}),
		)),
		wasmasm.Section(9, wasmasm.Vec(
			[]byte{0x00, 0x41, 0x00, 0x0b, 0x02, 0x02, 0x03}, // active: slots 0, 1 = funcs 2, 3
			[]byte{0x01, 0x00, 0x01, 0x04},                   // passive: func 4
			[]byte{0x03, 0x00, 0x03, 0x02, 0x03, 0x04},       // declarative: ref.func 2, 3, 4
		)),
	}
	if dataDrop {
		secs = append(secs, wasmasm.Section(12, wasmasm.Uleb(2)))
	}
	secs = append(secs, wasmasm.Section(10, wasmasm.Vec(code...)))
	data := [][]byte{wasmasm.Cat([]byte{0x00, 0x41, 0x10, 0x0b}, wasmasm.Name("snapshot"))} // active, at 16
	if dataDrop {
		data = append(data, wasmasm.Cat([]byte{0x01}, wasmasm.Name("p")))
	}
	secs = append(secs, wasmasm.Section(11, wasmasm.Vec(data...)))
	return wasmasm.Module(secs...)
}

// FuzzSnapshot compares, for modules SnapshotModule assembles, tasks that
// start from the module's snapshot (the first task's init, taken; the
// next ones from it) with tasks of an engine that takes none.
func FuzzSnapshot(f *testing.F, newEngine NewEngine) {
	for _, seed := range [][]byte{
		{0},
		{0, 0, 1, 2, 1, 2, 9, 2, 1, 1, 3, 2, 0},
		{1, 5, 0, 0, 0, 3, 7},
		{0, 4, 0, 0, 2, 0, 2},
		{0, 3, 3, 0, 5, 2, 9},
	} {
		f.Add(seed)
	}
	snap := newEngine(f, sandbox.Config{CacheDir: f.TempDir()})
	plain := newEngine(f, sandbox.Config{NoSnapshots: true})
	f.Fuzz(func(t *testing.T, b []byte) {
		wasm := SnapshotModule(b)
		outcome := func(m sandbox.Module) string {
			err := m.Run(context.Background(), sandbox.RunConfig{MemoryLimit: 4 << 20, Timeout: time.Minute})
			var ee *sandbox.ExitError
			switch {
			case errors.As(err, &ee):
				return fmt.Sprintf("code %d, trapped %t, memory limit %t", ee.Code, ee.Trap != "", errors.Is(err, sandbox.ErrMemoryLimit))
			case err == nil:
				return "ok"
			}
			return err.Error()
		}
		pm, err := plain.Compile(context.Background(), wasm)
		if err != nil {
			t.Fatalf("plain compile: %v", err)
		}
		defer pm.Close(context.Background())
		want := outcome(pm)
		sm, err := snap.Compile(context.Background(), wasm)
		if err != nil {
			t.Fatalf("compile: %v", err)
		}
		defer sm.Close(context.Background())
		for i := range 3 {
			if got := outcome(sm); got != want {
				used, why := sm.(sandbox.Snapshotter).Snapshot()
				t.Fatalf("run %d: %s; a start without snapshots: %s (snapshot %v: %s)", i, got, want, used, why)
			}
			Settled(t, sm)
		}
	})
}
