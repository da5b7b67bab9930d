package wasmbin

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/mandatevm/mandate/internal/wasmasm"
)

// fnBody is a code section entry: the body's size, no locals, code, end.
func fnBody(code ...byte) []byte {
	b := append([]byte{0x00}, code...)
	b = append(b, 0x0b)
	return append(wasmasm.Uleb(uint64(len(b))), b...)
}

var (
	sigVoidI32 = []byte{0x60, 0x00, 0x01, 0x7f} // () -> i32
	sigI32I32  = []byte{0x60, 0x01, 0x7f, 0x01, 0x7f}
	sigVoid    = []byte{0x60, 0x00, 0x00}
)

func exportEntry(name string, kind byte, idx uint64) []byte {
	return wasmasm.Cat(wasmasm.Name(name), []byte{kind}, wasmasm.Uleb(idx))
}

// wazeroRuntime validates with the features the wazero engine can check
// of those the decoder knows.
func wazeroRuntime(t testing.TB) wazero.Runtime {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter().WithCoreFeatures(
		api.CoreFeaturesV2|experimental.CoreFeaturesThreads|experimental.CoreFeaturesTailCall|experimental.CoreFeaturesExtendedConst))
	t.Cleanup(func() { r.Close(ctx) })
	return r
}

// growModule imports env.f, defines grow(delta) = memory.grow(delta),
// size() = memory.size and g() = global 0 + f(), a memory of 1 to 4 pages
// and an immutable global 7. Its type section already has (i32) -> i32.
func growModule() []byte {
	return wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec(sigVoidI32, sigI32I32)),
		wasmasm.Section(2, wasmasm.Vec(wasmasm.Cat(wasmasm.Name("env"), wasmasm.Name("f"), []byte{ExternFunc, 0}))),
		wasmasm.Section(3, wasmasm.Vec([]byte{1}, []byte{0}, []byte{0})),
		wasmasm.Section(5, []byte{0x01, 0x01, 0x01, 0x04}),
		wasmasm.Section(6, wasmasm.Vec([]byte{0x7f, 0x00, 0x41, 0x07, 0x0b})),
		wasmasm.Section(7, wasmasm.Vec(
			exportEntry("grow", ExternFunc, 1), exportEntry("size", ExternFunc, 2),
			exportEntry("g", ExternFunc, 3), exportEntry("memory", ExternMemory, 0))),
		wasmasm.Section(10, wasmasm.Vec(
			fnBody(0x20, 0x00, 0x40, 0x00),       // local.get 0; memory.grow 0
			fnBody(0x3f, 0x00),                   // memory.size 0
			fnBody(0x23, 0x00, 0x10, 0x00, 0x6a), // global.get 0; call 0; i32.add
		)),
	)
}

func TestTrackGrowthRuns(t *testing.T) {
	ctx := context.Background()
	in := growModule()
	out, n, err := TrackGrowth(in)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("TrackGrowth replaced %d memory.grow, want 1", n)
	}
	m, err := Parse(out)
	if err != nil {
		t.Fatalf("rewritten module does not parse: %v", err)
	}
	if k, ok := m.Exports[GrowthExport]; !ok || k != ExternGlobal {
		t.Fatalf("exports = %v, want %s as a global", m.Exports, GrowthExport)
	}
	// The type (i32) -> i32 is reused, not added.
	if !bytes.Contains(out, wasmasm.Section(1, wasmasm.Vec(sigVoidI32, sigI32I32))) {
		t.Errorf("type section changed")
	}

	r := wazeroRuntime(t)
	if _, err := r.NewHostModuleBuilder("env").NewFunctionBuilder().
		WithFunc(func() int32 { return 100 }).Export("f").Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	mod, err := r.Instantiate(ctx, out)
	if err != nil {
		t.Fatalf("rewritten module does not instantiate: %v", err)
	}
	call := func(name string, args ...uint64) int32 {
		t.Helper()
		res, err := mod.ExportedFunction(name).Call(ctx, args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return int32(res[0])
	}
	refused := func() uint64 { return mod.ExportedGlobal(GrowthExport).Get() }
	// Functions past the imports still work, and the global index space
	// did not shift.
	if got := call("g"); got != 107 {
		t.Errorf("g() = %d, want 107", got)
	}
	if got := call("grow", 1); got != 1 || refused() != 0 {
		t.Errorf("grow(1) = %d, refused %d; want 1, 0", got, refused())
	}
	if got := call("grow", 10); got != -1 || refused() != 12 { // 2 pages + 10: past the maximum of 4
		t.Errorf("grow(10) = %d, refused %d; want -1, 12", got, refused())
	}
	if got := call("grow", 1); got != 2 || refused() != 12 {
		t.Errorf("grow(1) = %d, refused %d; want 2, 12", got, refused())
	}
	// A smaller refused growth keeps the largest.
	if got := call("grow", 5); got != -1 || refused() != 12 {
		t.Errorf("grow(5) = %d, refused %d; want -1, 12", got, refused())
	}
	// A delta that wraps 32 bits is counted in 64.
	if got := call("grow", 0xffffffff); got != -1 || refused() != 3+0xffffffff {
		t.Errorf("grow(2^32-1) = %d, refused %d; want -1, %d", got, refused(), 3+0xffffffff)
	}
	if got := call("size"); got != 3 {
		t.Errorf("size() = %d, want 3", got)
	}
}

// TestTrackGrowthAddsSections rewrites a module with neither the type
// (i32) -> i32, nor globals, nor exports.
func TestTrackGrowthAddsSections(t *testing.T) {
	ctx := context.Background()
	in := wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec(sigVoidI32)),
		wasmasm.Section(3, wasmasm.Vec([]byte{0})),
		wasmasm.Section(5, []byte{0x01, 0x01, 0x01, 0x02}),
		wasmasm.Section(10, wasmasm.Vec(fnBody(0x41, 0x05, 0x40, 0x00))), // memory.grow 5
		wasmasm.Section(0, wasmasm.Name("custom"), []byte("tail")),
	)
	out, n, err := TrackGrowth(in)
	if err != nil || n != 1 {
		t.Fatalf("TrackGrowth = %d, %v", n, err)
	}
	m, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	var ids []byte
	for _, s := range m.Sections {
		ids = append(ids, s.ID)
	}
	if want := []byte{1, 3, 5, 6, 7, 10, 0}; !bytes.Equal(ids, want) {
		t.Errorf("section ids = %v, want %v", ids, want)
	}
	if !bytes.Contains(out, wasmasm.Section(1, wasmasm.Vec(sigVoidI32, sigI32I32))) {
		t.Errorf("type (i32) -> i32 not appended")
	}
	mod, err := wazeroRuntime(t).Instantiate(ctx, out)
	if err != nil {
		t.Fatalf("rewritten module does not instantiate: %v", err)
	}
	// Function 0 is not exported; the global still is.
	if g := mod.ExportedGlobal(GrowthExport); g == nil || g.Get() != 0 {
		t.Fatalf("refused = %v, want 0 before any growth", g)
	}
}

// shapes is one instruction of each immediate layout the decoder knows,
// chosen so that a wrong length lands on the bytes 0x40 0x00 (memory.grow
// 0) or an invalid opcode. They need not type-check.
var shapes = [][]byte{
	{0x00}, {0x01}, {0x0f}, {0x1a}, {0x1b},
	{0x02, 0x40, 0x0b}, {0x03, 0x7f, 0x0b}, {0x04, 0x01, 0x05, 0x0b}, {0x02, 0x7b, 0x0b}, {0x02, 0x70, 0x0b},
	{0x0c, 0x00}, {0x0d, 0x80, 0x00},
	{0x0e, 0x02, 0x00, 0x01, 0x00},
	{0x10, 0x00}, {0x12, 0x00}, {0x11, 0x00, 0x00}, {0x11, 0x01, 0x80, 0x00}, {0x13, 0x00, 0x00},
	{0x1c, 0x01, 0x7f}, {0x1c, 0x01, 0x6f},
	{0x20, 0x00}, {0x21, 0x00}, {0x22, 0x00}, {0x23, 0x00}, {0x24, 0x00}, {0x25, 0x00}, {0x26, 0x00},
	{0x28, 0x02, 0x40}, {0x2c, 0x00, 0xc0, 0x00}, {0x3e, 0x02, 0x40},
	{0x28, 0x42, 0x00, 0x40}, // multi-memory: memory 0 named
	{0x29, 0x03, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, // memory64 offset
	{0x3f, 0x00}, {0x3f, 0x80, 0x00},
	{0x41, 0x40}, {0x41, 0xc0, 0x00}, {0x42, 0x40}, {0x42, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00},
	{0x43, 0x40, 0x00, 0x40, 0x00}, {0x44, 0x40, 0x00, 0x40, 0x00, 0x40, 0x00, 0x40, 0x00},
	{0x45}, {0x6a}, {0xa7}, {0xbf}, {0xc0}, {0xc4},
	{0xd0, 0x70}, {0xd0, 0x6f}, {0xd1}, {0xd2, 0x00},
	{0xfc, 0x00}, {0xfc, 0x07}, {0xfc, 0x08, 0x00, 0x00}, {0xfc, 0x09, 0x00}, {0xfc, 0x0a, 0x00, 0x00},
	{0xfc, 0x0b, 0x00}, {0xfc, 0x0c, 0x00, 0x00}, {0xfc, 0x0d, 0x00}, {0xfc, 0x0e, 0x00, 0x00},
	{0xfc, 0x0f, 0x00}, {0xfc, 0x10, 0x00}, {0xfc, 0x11, 0x00},
	{0xfd, 0x00, 0x04, 0x40}, {0xfd, 0x0b, 0x04, 0x40}, {0xfd, 0x5d, 0x03, 0x40},
	append([]byte{0xfd, 0x0c}, bytes.Repeat([]byte{0x40, 0x00}, 8)...),
	append([]byte{0xfd, 0x0d}, bytes.Repeat([]byte{0x40, 0x00}, 8)...),
	{0xfd, 0x0e}, {0xfd, 0x14}, {0xfd, 0x15, 0x40}, {0xfd, 0x22, 0x40}, {0xfd, 0x23}, {0xfd, 0x53},
	{0xfd, 0x54, 0x00, 0x40, 0x40}, {0xfd, 0x5b, 0x03, 0x00, 0x40},
	{0xfd, 0x5e}, {0xfd, 0x80, 0x01}, {0xfd, 0xff, 0x01}, {0xfd, 0x80, 0x02}, {0xfd, 0x93, 0x02},
	{0xfe, 0x00, 0x02, 0x40}, {0xfe, 0x02, 0x03, 0x40}, {0xfe, 0x03, 0x00}, {0xfe, 0x10, 0x02, 0x40}, {0xfe, 0x4e, 0x02, 0x40},
}

// shapesModule has one function whose body is each shape followed by the
// given instruction, a memory, one global, and types () -> () and
// (i32) -> i32.
func shapesModule(after []byte) []byte {
	var code []byte
	for _, s := range shapes {
		code = append(code, s...)
		code = append(code, after...)
	}
	return wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec(sigVoid, sigI32I32)),
		wasmasm.Section(3, wasmasm.Vec([]byte{0})),
		wasmasm.Section(5, []byte{0x01, 0x00, 0x01}),
		wasmasm.Section(6, wasmasm.Vec([]byte{0x7f, 0x01, 0x41, 0x00, 0x0b})),
		wasmasm.Section(10, wasmasm.Vec(fnBody(code...))),
	)
}

func TestTrackGrowthDecodesEveryShape(t *testing.T) {
	out, n, err := TrackGrowth(shapesModule([]byte{0x40, 0x00}))
	if err != nil {
		t.Fatal(err)
	}
	if n != len(shapes) {
		t.Fatalf("replaced %d memory.grow, want %d", n, len(shapes))
	}
	// Function 1 is $grow: each memory.grow became "call 1".
	var code []byte
	for _, s := range shapes {
		code = append(append(code, s...), 0x10, 0x01)
	}
	grow := growBody(1) // global 1 is $refused
	if want := wasmasm.Section(10, wasmasm.Vec(fnBody(code...), append(wasmasm.Uleb(uint64(len(grow))), grow...))); !bytes.HasSuffix(out, want) {
		t.Errorf("rewritten body differs from the expected one")
	}
	if _, err := Parse(out); err != nil {
		t.Fatal(err)
	}
}

func TestTrackGrowthLeavesAlone(t *testing.T) {
	grow := wasmasm.Section(10, wasmasm.Vec(fnBody(0x41, 0x01, 0x40, 0x00, 0x1a)))
	types := wasmasm.Section(1, wasmasm.Vec(sigVoid))
	funcs := wasmasm.Section(3, wasmasm.Vec([]byte{0}))
	for _, tt := range []struct {
		name string
		wasm []byte
	}{
		{"no memory", wasmasm.Module(types, funcs, grow)},
		{"memory64", wasmasm.Module(types, funcs, wasmasm.Section(5, []byte{0x01, 0x04, 0x01}), grow)},
		{"two memories", wasmasm.Module(types,
			wasmasm.Section(2, wasmasm.Vec(wasmasm.Cat(wasmasm.Name("env"), wasmasm.Name("m"), []byte{ExternMemory, 0x00, 0x01}))),
			funcs, wasmasm.Section(5, []byte{0x01, 0x00, 0x01}), grow)},
		{"no memory.grow", wasmasm.Module(types, funcs, wasmasm.Section(5, []byte{0x01, 0x00, 0x01}),
			wasmasm.Section(10, wasmasm.Vec(fnBody(0x3f, 0x00, 0x1a))))},
		{"no code", wasmasm.Module(wasmasm.Section(5, []byte{0x01, 0x00, 0x01}))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, n, err := TrackGrowth(tt.wasm)
			if err != nil || n != 0 || !bytes.Equal(out, tt.wasm) {
				t.Errorf("TrackGrowth = %d, %v (changed: %v); want the module unchanged", n, err, !bytes.Equal(out, tt.wasm))
			}
		})
	}
}

func TestTrackGrowthRefuses(t *testing.T) {
	mod := func(body []byte, extra ...[]byte) []byte {
		secs := [][]byte{
			wasmasm.Section(1, wasmasm.Vec(sigVoid, sigI32I32)),
			wasmasm.Section(3, wasmasm.Vec([]byte{0})),
			wasmasm.Section(5, []byte{0x01, 0x00, 0x01}),
			wasmasm.Section(6, wasmasm.Vec([]byte{0x7f, 0x01, 0x41, 0x00, 0x0b})),
		}
		secs = append(secs, extra...)
		secs = append(secs, wasmasm.Section(10, wasmasm.Vec(body)))
		return wasmasm.Module(secs...)
	}
	grow := []byte{0x41, 0x01, 0x40, 0x00, 0x1a}
	withGrow := func(code ...byte) []byte { return fnBody(append(append([]byte{}, code...), grow...)...) }
	for _, tt := range []struct {
		name string
		wasm []byte
		want string // in the error
		is   error
	}{
		{"reserved export", mod(withGrow(), wasmasm.Section(7, wasmasm.Vec(exportEntry(GrowthExport, ExternFunc, 0)))), "reserved", nil},
		{"reserved export without memory.grow", mod(fnBody(), wasmasm.Section(7, wasmasm.Vec(exportEntry(GrowthExport, ExternGlobal, 0)))), "reserved", nil},
		{"legacy try", mod(withGrow(0x06, 0x40, 0x0b)), "opcode 0x6", ErrUnsupported},
		{"GC", mod(withGrow(0xfb, 0x00, 0x00)), "opcode 0xfb", ErrUnsupported},
		{"call_ref", mod(withGrow(0x14, 0x00)), "opcode 0x14", ErrUnsupported},
		{"try_table", mod(withGrow(0x1f, 0x40, 0x00, 0x0b)), "opcode 0x1f", ErrUnsupported},
		{"wide arithmetic", mod(withGrow(0xfc, 0x13)), "0xfc 0x13", ErrUnsupported},
		{"unassigned SIMD", mod(withGrow(0xfd, 0x9a, 0x01)), "0xfd 0x9a", ErrUnsupported},
		{"past relaxed SIMD", mod(withGrow(0xfd, 0x94, 0x02)), "0xfd 0x114", ErrUnsupported},
		{"shared-everything atomics", mod(withGrow(0xfe, 0x4f, 0x00, 0x00)), "0xfe 0x4f", ErrUnsupported},
		{"typed ref.null", mod(withGrow(0xd0, 0x00)), "heap type", ErrUnsupported},
		{"typed local", mod(append(wasmasm.Uleb(7), 0x01, 0x01, 0x63, 0x00, 0x41, 0x01, 0x0b)), "local of type", ErrUnsupported},
		{"GC type", wasmasm.Module(wasmasm.Section(1, wasmasm.Vec([]byte{0x5f, 0x00})), wasmasm.Section(3, wasmasm.Vec([]byte{0})),
			wasmasm.Section(5, []byte{0x01, 0x00, 0x01}), wasmasm.Section(10, wasmasm.Vec(withGrow()))), "type form", ErrUnsupported},
		{"global.set of the new global", mod(withGrow(0x42, 0x01, 0x24, 0x01)), "global 1 of 1", ErrMalformed},
		{"global.get past the globals", mod(withGrow(0x23, 0x05, 0x1a)), "global 5 of 1", ErrMalformed},
		{"call of the new function", mod(withGrow(0x41, 0x01, 0x10, 0x01, 0x1a)), "function 1 of 1", ErrMalformed},
		{"ref.func of the new function", mod(withGrow(0xd2, 0x01, 0x1a)), "function 1 of 1", ErrMalformed},
		{"export of the new global", mod(withGrow(), wasmasm.Section(7, wasmasm.Vec(exportEntry("g", ExternGlobal, 1)))), "global 1", ErrMalformed},
		{"block of a missing type", mod(withGrow(0x02, 0x05, 0x0b)), "type 5 of 2", ErrMalformed},
		{"call_indirect of a missing type", mod(withGrow(0x11, 0x02, 0x00)), "type 2 of 2", ErrMalformed},
		{"function of a missing type", wasmasm.Module(wasmasm.Section(1, wasmasm.Vec(sigVoid)), wasmasm.Section(3, wasmasm.Vec([]byte{3})),
			wasmasm.Section(5, []byte{0x01, 0x00, 0x01}), wasmasm.Section(10, wasmasm.Vec(withGrow()))), "type 3 of 1", ErrMalformed},
		{"truncated immediate", mod([]byte{7, 0x00, 0x41, 0x01, 0x40, 0x00, 0x41, 0x80}), "truncated", ErrMalformed},
		{"truncated v128.const", mod(fnBody(0x41, 0x01, 0x40, 0x00, 0xfd, 0x0c, 0x00)), "truncated", ErrMalformed},
		{"atomic.fence with a flag", mod(withGrow(0xfe, 0x03, 0x01)), "atomic.fence", ErrMalformed},
		{"bodies and functions disagree", wasmasm.Module(wasmasm.Section(1, wasmasm.Vec(sigVoid)), wasmasm.Section(3, wasmasm.Vec([]byte{0}, []byte{0})),
			wasmasm.Section(5, []byte{0x01, 0x00, 0x01}), wasmasm.Section(10, wasmasm.Vec(withGrow()))), "2 functions", ErrMalformed},
		{"truncated global", wasmasm.Module(wasmasm.Section(1, wasmasm.Vec(sigVoid)), wasmasm.Section(3, wasmasm.Vec([]byte{0})),
			wasmasm.Section(5, []byte{0x01, 0x00, 0x01}), wasmasm.Section(6, []byte{0x01, 0x7e, 0x01, 0x42}),
			wasmasm.Section(10, wasmasm.Vec(withGrow()))), "global section", ErrMalformed},
		{"global initialized from the new global", wasmasm.Module(wasmasm.Section(1, wasmasm.Vec(sigVoid)), wasmasm.Section(3, wasmasm.Vec([]byte{0})),
			wasmasm.Section(5, []byte{0x01, 0x00, 0x01}), wasmasm.Section(6, []byte{0x01, 0x7e, 0x00, 0x23, 0x01, 0x0b}),
			wasmasm.Section(10, wasmasm.Vec(withGrow()))), "global 1 of 1", ErrMalformed},
		{"shared global", wasmasm.Module(wasmasm.Section(1, wasmasm.Vec(sigVoid)), wasmasm.Section(3, wasmasm.Vec([]byte{0})),
			wasmasm.Section(5, []byte{0x01, 0x00, 0x01}), wasmasm.Section(6, []byte{0x01, 0x7e, 0x02, 0x42, 0x00, 0x0b}),
			wasmasm.Section(10, wasmasm.Vec(withGrow()))), "mutability", ErrUnsupported},
		{"two code sections", mod(withGrow(), wasmasm.Section(10, wasmasm.Vec(withGrow()))), "two sections", ErrMalformed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := TrackGrowth(tt.wasm)
			if err == nil || !strings.Contains(err.Error(), tt.want) || tt.is != nil && !errors.Is(err, tt.is) {
				t.Fatalf("TrackGrowth = %v, want an error with %q (is %v)", err, tt.want, tt.is)
			}
		})
	}
}

// TestTrackGrowthCustomSections drops DWARF, whose code offsets would be
// stale, and keeps the rest.
func TestTrackGrowthCustomSections(t *testing.T) {
	custom := func(name string) []byte {
		if name == "name" { // read by wazero: function 0 is "f"
			return wasmasm.Section(0, wasmasm.Name(name), []byte{0x01, 0x04, 0x01, 0x00, 0x01, 'f'})
		}
		return wasmasm.Section(0, wasmasm.Name(name), []byte{1, 2, 3})
	}
	in := wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec(sigVoid)),
		wasmasm.Section(3, wasmasm.Vec([]byte{0})),
		wasmasm.Section(5, []byte{0x01, 0x00, 0x01}),
		custom(".debug_info"),
		wasmasm.Section(10, wasmasm.Vec(fnBody(0x41, 0x01, 0x40, 0x00, 0x1a))),
		custom("name"), custom(".debug_line"), custom("producers"),
	)
	out, n, err := TrackGrowth(in)
	if err != nil || n != 1 {
		t.Fatalf("TrackGrowth = %d, %v", n, err)
	}
	for name, want := range map[string]bool{".debug_info": false, ".debug_line": false, "name": true, "producers": true} {
		if got := bytes.Contains(out, custom(name)); got != want {
			t.Errorf("custom section %q kept = %v, want %v", name, got, want)
		}
	}
	if _, err := wazeroRuntime(t).CompileModule(context.Background(), out); err != nil {
		t.Fatalf("rewritten module does not compile: %v", err)
	}
}

func FuzzGrowthRewrite(f *testing.F) {
	f.Add(growModule())
	f.Add(shapesModule([]byte{0x40, 0x00}))
	f.Add(wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec(sigVoidI32)),
		wasmasm.Section(3, wasmasm.Vec([]byte{0})),
		wasmasm.Section(5, []byte{0x01, 0x01, 0x01, 0x02}),
		wasmasm.Section(10, wasmasm.Vec(fnBody(0x41, 0x05, 0x40, 0x00))),
	))
	r := wazeroRuntime(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, wasm []byte) {
		out, n, err := TrackGrowth(wasm)
		if err != nil {
			return
		}
		if n == 0 {
			if !bytes.Equal(out, wasm) {
				t.Fatal("TrackGrowth changed a module it left alone")
			}
			return
		}
		m, err := Parse(out)
		if err != nil {
			t.Fatalf("rewritten module does not parse: %v", err)
		}
		if m.Exports[GrowthExport] != ExternGlobal {
			t.Fatalf("rewritten module does not export %s", GrowthExport)
		}
		// A module wazero accepts stays acceptable. (No import can be
		// satisfied here, so only compilation is checked.)
		cm, err := r.CompileModule(ctx, wasm)
		if err != nil {
			return
		}
		cm.Close(ctx)
		cm, err = r.CompileModule(ctx, out)
		if err != nil {
			t.Fatalf("wazero compiles the module but not its rewrite: %v", err)
		}
		cm.Close(ctx)
	})
}
