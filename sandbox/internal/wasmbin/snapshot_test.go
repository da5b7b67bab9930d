package wasmbin

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/mandatevm/mandate/internal/wasmasm"
)

// initModule is a reactor whose _initialize writes 0x2a at address 70000
// (growing its memory to 2 pages first) and sets its mutable globals (an
// i32 to 7, an i64 to -3, an f64 to 1.5); "get" returns the byte plus the
// i32 global. An immutable global and a data segment are kept.
func initModule(extra ...[]byte) []byte {
	i32, i64, f64 := byte(0x7f), byte(0x7e), byte(0x7c)
	globals := wasmasm.Vec(
		[]byte{i32, 0x01, 0x41, 0x00, 0x0b},                   // 0: mut i32 = 0
		[]byte{i32, 0x00, 0x41, 0x09, 0x0b},                   // 1: i32 = 9
		[]byte{i64, 0x01, 0x42, 0x00, 0x0b},                   // 2: mut i64 = 0
		[]byte{f64, 0x01, 0x44, 0, 0, 0, 0, 0, 0, 0, 0, 0x0b}, // 3: mut f64 = 0
	)
	initBody := wasmasm.Cat(
		[]byte{0x00},                                                            // no locals
		[]byte{0x41, 0x01, 0x40, 0x00},                                          // memory.grow 1
		[]byte{0x1a},                                                            // drop
		[]byte{0x41}, wasmasm.Sleb(70000), []byte{0x41, 0x2a, 0x3a, 0x00, 0x00}, // i32.store8
		[]byte{0x41, 0x07, 0x24, 0x00},                         // global.set 0 = 7
		[]byte{0x42, 0x7d, 0x24, 0x02},                         // global.set 2 = -3
		[]byte{0x44, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 0x24, 0x03}, // global.set 3 = 1.5
		[]byte{0x0b},
	)
	getBody := wasmasm.Cat(
		[]byte{0x00},
		[]byte{0x41}, wasmasm.Sleb(70000), []byte{0x2d, 0x00, 0x00}, // i32.load8_u
		[]byte{0x23, 0x00, 0x6a}, // + global 0
		[]byte{0x0b},
	)
	secs := [][]byte{
		wasmasm.Section(1, wasmasm.Vec([]byte{0x60, 0x00, 0x00}, []byte{0x60, 0x00, 0x01, 0x7f})),
		wasmasm.Section(3, wasmasm.Vec([]byte{0x00}, []byte{0x01})),
		wasmasm.Section(5, []byte{0x01, 0x00, 0x01}),
		wasmasm.Section(6, globals),
		wasmasm.Section(7, wasmasm.Vec(
			append(wasmasm.Name("memory"), 0x02, 0x00),
			append(wasmasm.Name("_initialize"), 0x00, 0x00),
			append(wasmasm.Name("get"), 0x00, 0x01))),
	}
	secs = append(secs, extra...)
	secs = append(secs,
		wasmasm.Section(10, wasmasm.Vec(
			wasmasm.Cat(wasmasm.Uleb(uint64(len(initBody))), initBody),
			wasmasm.Cat(wasmasm.Uleb(uint64(len(getBody))), getBody))),
		wasmasm.Section(11, wasmasm.Vec(wasmasm.Cat([]byte{0x00, 0x41, 0x10, 0x0b}, wasmasm.Uleb(4), []byte("data")))),
	)
	return wasmasm.Module(secs...)
}

// TestSnapshotRoundTrip: the module written from a snapshot starts with
// the memory and globals _initialize left, keeps what init did not touch,
// exports no _initialize, and still validates.
func TestSnapshotRoundTrip(t *testing.T) {
	ctx := context.Background()
	rt := wazeroRuntime(t)
	src := initModule()
	variant, globals, err := ExportGlobals(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(globals) != 4 || globals[1].Mutable || !globals[0].Mutable {
		t.Fatalf("globals %+v", globals)
	}
	inst, err := rt.Instantiate(ctx, variant)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inst.ExportedFunction("_initialize").Call(ctx); err != nil {
		t.Fatal(err)
	}
	mem, _ := inst.Memory().Read(0, inst.Memory().Size())
	vals := make([]uint64, len(globals))
	for i, g := range globals {
		if g.Mutable {
			vals[i] = inst.ExportedGlobal(SnapshotGlobalExport(i)).Get()
		}
	}
	snap, err := ApplySnapshot(src, bytes.Clone(mem), vals)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Parse(snap)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.Exports["_initialize"]; ok || m.MemMin != 2 {
		t.Fatalf("snapshot exports %v, memory of %d pages", m.Exports, m.MemMin)
	}
	got, err := rt.Instantiate(ctx, snap)
	if err != nil {
		t.Fatalf("the snapshot does not instantiate: %v", err)
	}
	res, err := got.ExportedFunction("get").Call(ctx)
	if err != nil || res[0] != 0x2a+7 {
		t.Fatalf("get = %v, %v; want %d", res, err, 0x2a+7)
	}
	if b, _ := got.Memory().Read(0x10, 4); string(b) != "data" {
		t.Errorf("the data segment: %q", b)
	}
}

// TestSnapshotRefuses: what ApplySnapshot cannot make equivalent.
func TestSnapshotRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		wasm []byte
	}{
		{"start function", initModule(wasmasm.Section(8, []byte{0x00}))},
		{"data count", initModule(wasmasm.Section(12, []byte{0x01}))},
		{"command", wasmasm.Module(
			wasmasm.Section(1, wasmasm.Vec([]byte{0x60, 0x00, 0x00})),
			wasmasm.Section(3, wasmasm.Vec([]byte{0x00})),
			wasmasm.Section(5, []byte{0x01, 0x00, 0x01}),
			wasmasm.Section(7, wasmasm.Vec(append(wasmasm.Name("_start"), 0x00, 0x00), append(wasmasm.Name("_initialize"), 0x00, 0x00))),
			wasmasm.Section(10, wasmasm.Vec([]byte{0x02, 0x00, 0x0b})))},
	} {
		if _, _, err := ExportGlobals(tc.wasm); !errors.Is(err, ErrNoSnapshot) {
			t.Errorf("%s: %v, want ErrNoSnapshot", tc.name, err)
		}
		if _, err := ApplySnapshot(tc.wasm, make([]byte, 1<<16), nil); err == nil {
			t.Errorf("%s: ApplySnapshot accepted it", tc.name)
		}
	}
	if _, err := ApplySnapshot(initModule(), make([]byte, 100), make([]uint64, 4)); !errors.Is(err, ErrNoSnapshot) {
		t.Errorf("a memory of part of a page: %v", err)
	}
}

func TestNonZeroRanges(t *testing.T) {
	mem := make([]byte, 10000)
	mem[3], mem[4], mem[10], mem[5000], mem[9999] = 1, 2, 3, 4, 5
	segs := nonZeroRanges(mem, 16)
	if len(segs) != 3 || segs[0].off != 3 || len(segs[0].init) != 8 || segs[1].off != 5000 || segs[2].off != 9999 {
		t.Fatalf("%+v", segs)
	}
	if len(nonZeroRanges(make([]byte, 1<<16), MaxDataGap)) != 0 {
		t.Error("zeros gave segments")
	}
}

// FuzzSnapshot: any module ExportGlobals and ApplySnapshot accept becomes
// one that still parses, never a panic.
func FuzzSnapshot(f *testing.F) {
	f.Add(initModule(), []byte{1, 2, 3})
	f.Add(initModule(wasmasm.Section(8, []byte{0x00})), []byte{})
	f.Fuzz(func(t *testing.T, wasm, fill []byte) {
		variant, globals, err := ExportGlobals(wasm)
		if err != nil {
			return
		}
		if _, err := Parse(variant); err != nil {
			t.Fatalf("the variant does not parse: %v", err)
		}
		m, err := Parse(wasm)
		if err != nil {
			t.Fatal(err)
		}
		pages := min(m.MemMin, 4) + 1
		mem := make([]byte, pages<<16)
		for i := range fill {
			mem[(i*7919)%len(mem)] = fill[i]
		}
		vals := make([]uint64, len(globals))
		for i := range vals {
			vals[i] = uint64(i) * 0x9e3779b97f4a7c15
		}
		out, err := ApplySnapshot(wasm, mem, vals)
		if err != nil {
			return
		}
		if _, err := Parse(out); err != nil {
			t.Fatalf("the snapshot does not parse: %v", err)
		}
	})
}
