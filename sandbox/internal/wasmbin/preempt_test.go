package wasmbin

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/mandatevm/mandate/internal/wasmasm"
)

// preemptModule is a module using every kind of function reference that
// Preempt renumbers. It imports env.f (returns 7) and defines
//
//	1 sum(n) = 1 + 2 + ... + n, in a loop
//	2 rec(n) = n == 0 ? f() : rec(n-1) + 1, recursion without a loop
//	3 indirect() = table[0](5), table[0] = sum (an active element segment)
//	4 start(): g0 = rec(3) (the start function)
//	5 viaRef() = table[1](4) after table[1] = g1, g1 = ref.func sum
//	6 passive() = table[1](0) after table.init of a passive segment
//	  (ref.func rec) into table[1]
//
// and exports them, g0 and its memory; its name section names every
// function and sum's locals.
func preemptModule() []byte {
	sum := wasmasm.Cat([]byte{0x01, 0x01, 0x7f}, // one local i32 (acc)
		[]byte{0x02, 0x40, 0x03, 0x40},                   // block; loop
		[]byte{0x20, 0x00, 0x45, 0x0d, 0x01},             // local.get n; i32.eqz; br_if 1
		[]byte{0x20, 0x01, 0x20, 0x00, 0x6a, 0x21, 0x01}, // acc += n
		[]byte{0x20, 0x00, 0x41, 0x01, 0x6b, 0x21, 0x00}, // n--
		[]byte{0x0c, 0x00, 0x0b, 0x0b},                   // br 0; end; end
		[]byte{0x20, 0x01, 0x0b})                         // local.get acc; end
	rec := wasmasm.Cat([]byte{0x00},
		[]byte{0x20, 0x00, 0x45, 0x04, 0x7f, 0x10, 0x00, 0x05},                         // if (n == 0) (result i32) f() else
		[]byte{0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, 0x02, 0x41, 0x01, 0x6a, 0x0b, 0x0b}) // rec(n-1) + 1
	body := func(code ...byte) []byte { return wasmasm.Cat(wasmasm.Uleb(uint64(len(code))), code) }
	withLen := func(b []byte) []byte { return wasmasm.Cat(wasmasm.Uleb(uint64(len(b))), b) }
	names := wasmasm.Cat(wasmasm.Name("name"),
		wasmasm.Section(1, wasmasm.Vec(
			wasmasm.Cat([]byte{0}, wasmasm.Name("f")), wasmasm.Cat([]byte{1}, wasmasm.Name("sum")),
			wasmasm.Cat([]byte{2}, wasmasm.Name("rec")), wasmasm.Cat([]byte{3}, wasmasm.Name("indirect")),
			wasmasm.Cat([]byte{4}, wasmasm.Name("start")), wasmasm.Cat([]byte{5}, wasmasm.Name("viaRef")),
			wasmasm.Cat([]byte{6}, wasmasm.Name("passive")))),
		wasmasm.Section(2, wasmasm.Vec(wasmasm.Cat([]byte{1}, wasmasm.Vec(
			wasmasm.Cat([]byte{0}, wasmasm.Name("n")), wasmasm.Cat([]byte{1}, wasmasm.Name("acc")))))),
		wasmasm.Section(7, wasmasm.Vec(wasmasm.Cat([]byte{0}, wasmasm.Name("g0")))), // kept as it is
	)
	return wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec(sigVoidI32, sigI32I32, sigVoid)),
		wasmasm.Section(2, wasmasm.Vec(wasmasm.Cat(wasmasm.Name("env"), wasmasm.Name("f"), []byte{ExternFunc, 0}))),
		wasmasm.Section(3, wasmasm.Vec([]byte{1}, []byte{1}, []byte{0}, []byte{2}, []byte{0}, []byte{0})),
		wasmasm.Section(4, wasmasm.Vec([]byte{0x70, 0x00, 0x02})), // funcref table, min 2
		wasmasm.Section(5, []byte{0x01, 0x00, 0x01}),
		wasmasm.Section(6, wasmasm.Vec(
			[]byte{0x7f, 0x01, 0x41, 0x00, 0x0b}, // g0: mut i32 = 0
			[]byte{0x70, 0x00, 0xd2, 0x01, 0x0b}, // g1: funcref = ref.func sum
		)),
		wasmasm.Section(7, wasmasm.Vec(
			exportEntry("sum", ExternFunc, 1), exportEntry("rec", ExternFunc, 2),
			exportEntry("indirect", ExternFunc, 3), exportEntry("viaRef", ExternFunc, 5),
			exportEntry("passive", ExternFunc, 6),
			exportEntry("g0", ExternGlobal, 0), exportEntry("memory", ExternMemory, 0))),
		wasmasm.Section(8, []byte{4}),
		wasmasm.Section(9, wasmasm.Vec(
			[]byte{0x00, 0x41, 0x00, 0x0b, 0x01, 0x01},                         // active, table 0 at 0: sum
			[]byte{0x05, 0x70, 0x01, 0xd2, 0x02, 0x0b},                         // passive, exprs: ref.func rec
			[]byte{0x02, 0x00, 0x41, 0x01, 0x0b, 0x00, 0x01, 0x03},             // active, table 0 at 1: indirect
			[]byte{0x03, 0x00, 0x02, 0x05, 0x06},                               // declarative: viaRef, passive
			[]byte{0x06, 0x00, 0x41, 0x01, 0x0b, 0x70, 0x01, 0xd2, 0x01, 0x0b}, // active exprs, table 0 at 1: sum
		)),
		wasmasm.Section(10, wasmasm.Vec(
			withLen(sum), withLen(rec),
			body(0x00, 0x41, 0x05, 0x41, 0x00, 0x11, 0x01, 0x00, 0x0b),                                     // indirect
			body(0x00, 0x41, 0x03, 0x10, 0x02, 0x24, 0x00, 0x0b),                                           // start
			body(0x00, 0x41, 0x01, 0x23, 0x01, 0x26, 0x00, 0x41, 0x04, 0x41, 0x01, 0x11, 0x01, 0x00, 0x0b), // viaRef
			body(0x00, 0x41, 0x01, 0x41, 0x00, 0x41, 0x01, 0xfc, 0x0c, 0x01, 0x00, // table.init 1 0 (1, 0, 1)
				0x41, 0x00, 0x41, 0x01, 0x11, 0x01, 0x00, 0x0b), // table[1](0)
		)),
		wasmasm.Section(0, names),
	)
}

// yields counts the calls of PreemptYield; it sets the stop flag's value
// back to 0 when clear is set.
type yields struct {
	n     int
	clear bool
}

// preemptRuntime is a wazero runtime (the compiler, where supported, with
// the engine's default features) with env.f and PreemptModule.
func preemptRuntime(t testing.TB, y *yields) wazero.Runtime {
	t.Helper()
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	t.Cleanup(func() { r.Close(ctx) })
	if _, err := r.NewHostModuleBuilder("env").NewFunctionBuilder().
		WithGoFunction(api.GoFunc(func(_ context.Context, s []uint64) { s[0] = 7 }), nil, []api.ValueType{api.ValueTypeI32}).
		Export("f").Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.NewHostModuleBuilder(PreemptModule).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, m api.Module, _ []uint64) {
			y.n++
			if y.clear {
				m.ExportedGlobal(StopExport).(api.MutableGlobal).Set(0)
			}
		}), nil, nil).
		Export(PreemptYield).Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	return r
}

func call(t *testing.T, m api.Module, name string, args ...uint64) uint64 {
	t.Helper()
	res, err := m.ExportedFunction(name).Call(context.Background(), args...)
	if err != nil {
		t.Fatalf("%s%v: %v", name, args, err)
	}
	return res[0]
}

// TestPreemptSameResults runs the module and its rewrite: every function
// reached by a call, a table, ref.func, the start section and the exports
// is still the same function.
func TestPreemptSameResults(t *testing.T) {
	in := preemptModule()
	out, err := Preempt(in, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for name, wasm := range map[string][]byte{"original": in, "rewritten": out} {
		t.Run(name, func(t *testing.T) {
			var y yields
			m, err := preemptRuntime(t, &y).InstantiateWithConfig(context.Background(), wasm, wazero.NewModuleConfig().WithName(""))
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				fn   string
				args []uint64
				want uint64
			}{
				{"sum", []uint64{100}, 5050},
				{"rec", []uint64{10}, 17},
				{"indirect", nil, 15},
				{"viaRef", nil, 10},
				{"passive", nil, 7},
			} {
				if got := call(t, m, c.fn, c.args...); got != c.want {
					t.Errorf("%s%v = %d, want %d", c.fn, c.args, got, c.want)
				}
			}
			if got := m.ExportedGlobal("g0").Get(); got != 10 {
				t.Errorf("g0 after the start function = %d, want 10", got)
			}
			if y.n != 0 {
				t.Errorf("%d yields within the budget, want 0", y.n)
			}
		})
	}
}

// TestPreemptNames keeps every function's name with its function.
func TestPreemptNames(t *testing.T) {
	out, err := Preempt(preemptModule(), PreemptBudget)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := preemptRuntime(t, &yields{}).CompileModule(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	for export, def := range cm.ExportedFunctions() {
		if def.Name() != export {
			t.Errorf("export %q is the function named %q", export, def.Name())
		}
	}
	imp := cm.ImportedFunctions()
	if len(imp) != 2 || imp[0].Name() != "f" || imp[1].Name() != "" {
		t.Errorf("imports named %q and %q, want f and none", imp[0].Name(), imp[1].Name())
	}
	if !bytes.Contains(out, wasmasm.Section(7, wasmasm.Vec(wasmasm.Cat([]byte{0}, wasmasm.Name("g0"))))) {
		t.Errorf("global names not kept")
	}
}

// TestPreemptWeights checks the weights: sum's loop pays for its 13
// instructions and, since sum runs straight into it, for the function's 5
// outside it; rec has no loop and pays its 13 at entry.
func TestPreemptWeights(t *testing.T) {
	in := preemptModule()
	m, err := Parse(in)
	if err != nil {
		t.Fatal(err)
	}
	at, err := indexSections(m)
	if err != nil {
		t.Fatal(err)
	}
	sc := &codeScanner{types: 3, funcs: 7, globals: 2, preempt: true}
	bodies, err := sc.scanCode(at.payload(in, m, secCode), 6)
	if err != nil {
		t.Fatal(err)
	}
	sum, rec := bodies[0], bodies[1]
	if len(sum.loops) != 1 || sum.loops[0].weight != 13 || sum.entryWeight != 5 || !sum.merged {
		t.Errorf("sum: loops %v, entry weight %d, merged %v; want one loop of 13, 5, true", sum.loops, sum.entryWeight, sum.merged)
	}
	if len(rec.loops) != 0 || rec.entryWeight != 13 || rec.merged {
		t.Errorf("rec: loops %v, entry weight %d, merged %v; want none, 13, false", rec.loops, rec.entryWeight, rec.merged)
	}
	if got, want := len(rec.funcRefs), 2; got != want {
		t.Errorf("rec: %d function references, want %d", got, want)
	}

	// Nested loops: the outer pays for what is outside the inner one.
	nested := wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec(sigVoid)),
		wasmasm.Section(3, wasmasm.Vec([]byte{0})),
		wasmasm.Section(10, wasmasm.Vec(fnBody(
			0x01,             // nop
			0x03, 0x40, 0x01, // loop; nop
			0x03, 0x40, 0x01, 0x01, 0x0b, // loop; nop; nop; end
			0x04, 0x40, 0x03, 0x40, 0x0b, 0x0b, // if; loop; end; end
			0x0b, // end
		))),
	)
	m, _ = Parse(nested)
	at, _ = indexSections(m)
	sc = &codeScanner{types: 1, funcs: 1, preempt: true}
	bodies, err = sc.scanCode(at.payload(nested, m, secCode), 1)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, l := range bodies[0].loops {
		got = append(got, l.weight)
	}
	// Outer: nop, loop, if, loop, end, end; inner: nop, nop, end; in the
	// if: end. Outside: nop, loop, end. The first instruction is a nop, so
	// the body still runs straight into the loop.
	if want := []int{6, 3, 1}; !slicesEqual(got, want) || bodies[0].entryWeight != 3 || !bodies[0].merged {
		t.Errorf("weights %v, entry %d, merged %v; want %v, 3, true", got, bodies[0].entryWeight, bodies[0].merged, want)
	}
}

func slicesEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestPreemptYields checks when the rewrite calls PreemptYield: when the
// budget is spent, and at every check while the stop flag is set.
func TestPreemptYields(t *testing.T) {
	ctx := context.Background()
	instantiate := func(t *testing.T, budget uint32, y *yields) api.Module {
		t.Helper()
		out, err := Preempt(preemptModule(), budget)
		if err != nil {
			t.Fatal(err)
		}
		m, err := preemptRuntime(t, y).InstantiateWithConfig(ctx, out, wazero.NewModuleConfig().WithName(""))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	t.Run("budget", func(t *testing.T) {
		var y yields
		m := instantiate(t, 100, &y) // the start function pays 4 entries of rec: 4*13, 8 at its own
		y.n = 0
		m.ExportedGlobal("g0").(api.MutableGlobal).Set(0)
		// sum(n) passes its loop header n+1 times, 18 each.
		if got := call(t, m, "sum", 1000); got != 500500 {
			t.Fatalf("sum(1000) = %d", got)
		}
		// From a budget of 100, every sixth check is below zero.
		if min, max := 1001*18/118, 1001/6+1; y.n < min || y.n > max {
			t.Errorf("%d yields for 1001 checks of 18 with a budget of 100, want %d to %d", y.n, min, max)
		}
		y.n = 0
		call(t, m, "rec", 600) // 601 entries of 13
		if min, max := 601*13/113, 601/8+1; y.n < min || y.n > max {
			t.Errorf("%d yields for 601 entries of 13, want %d to %d", y.n, min, max)
		}
	})
	t.Run("stop", func(t *testing.T) {
		var y yields
		m := instantiate(t, maxWeight, &y)
		stop := m.ExportedGlobal(StopExport).(api.MutableGlobal)
		stop.Set(StopValue)
		call(t, m, "sum", 10)
		if y.n != 11 {
			t.Errorf("sum(10) with the stop flag set yielded %d times, want 11 (every loop header)", y.n)
		}
		y.n = 0
		call(t, m, "rec", 10)
		if y.n != 11 {
			t.Errorf("rec(10) with the stop flag set yielded %d times, want 11 (every entry)", y.n)
		}
		y.n, y.clear = 0, true
		call(t, m, "rec", 10)
		if y.n != 1 {
			t.Errorf("rec(10) with the stop flag cleared by the first yield yielded %d times, want 1", y.n)
		}
	})
}

// TestPreemptNoFunctions: a module without functions is rewritten too (its
// sections are decoded either way) and still instantiates.
func TestPreemptNoFunctions(t *testing.T) {
	for name, wasm := range map[string][]byte{
		"no functions": wasmasm.Module(wasmasm.Section(5, []byte{0x01, 0x00, 0x01})),
		"imports only": wasmasm.Module(wasmasm.Section(1, wasmasm.Vec(sigVoidI32)),
			wasmasm.Section(2, wasmasm.Vec(wasmasm.Cat(wasmasm.Name("env"), wasmasm.Name("f"), []byte{ExternFunc, 0})))),
	} {
		out, err := Preempt(wasm, PreemptBudget)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := preemptRuntime(t, &yields{}).Instantiate(context.Background(), out); err != nil {
			t.Errorf("%s: rewritten module does not instantiate: %v", name, err)
		}
	}
}

func TestPreemptAddsSections(t *testing.T) {
	// No type () -> (), no import, global or export section: all added,
	// in order.
	in := wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec(sigVoidI32)),
		wasmasm.Section(3, wasmasm.Vec([]byte{0})),
		wasmasm.Section(5, []byte{0x01, 0x00, 0x01}),
		wasmasm.Section(10, wasmasm.Vec(fnBody(0x41, 0x05))),
	)
	out, err := Preempt(in, PreemptBudget)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	var ids []byte
	for _, s := range m.Sections {
		ids = append(ids, s.ID)
	}
	if want := []byte{1, 2, 3, 5, 6, 7, 10}; !bytes.Equal(ids, want) {
		t.Errorf("section ids = %v, want %v", ids, want)
	}
	if len(m.Imports) != 1 || m.Imports[0] != (Import{Module: PreemptModule, Name: PreemptYield, Kind: ExternFunc}) {
		t.Errorf("imports = %v", m.Imports)
	}
	if _, err := preemptRuntime(t, &yields{}).Instantiate(context.Background(), out); err != nil {
		t.Fatalf("rewritten module does not instantiate: %v", err)
	}
}

func TestPreemptRefuses(t *testing.T) {
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
	for _, tt := range []struct {
		name   string
		wasm   []byte
		budget uint32
		want   string // in the error
		is     error
	}{
		{"imports the engine's module", wasmasm.Module(
			wasmasm.Section(1, wasmasm.Vec(sigVoid)),
			wasmasm.Section(2, wasmasm.Vec(wasmasm.Cat(wasmasm.Name(PreemptModule), wasmasm.Name(PreemptYield), []byte{ExternFunc, 0}))),
			wasmasm.Section(3, wasmasm.Vec([]byte{0})),
			wasmasm.Section(10, wasmasm.Vec(fnBody(0x10, 0x00)))), 0, "reserved", nil},
		{"exports the stop flag's name", mod(fnBody(), wasmasm.Section(7, wasmasm.Vec(exportEntry(StopExport, ExternGlobal, 0)))), 0, "reserved", nil},
		{"rewritten twice", func() []byte {
			out, err := Preempt(preemptModule(), PreemptBudget)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}(), 0, "reserved", nil},
		{"global.get of a new global", mod(fnBody(0x23, 0x01, 0x1a)), 0, "global 1 of 1", ErrMalformed},
		{"call of a function past the index space", mod(fnBody(0x10, 0x01)), 0, "function 1 of 1", ErrMalformed},
		{"export of a function past the index space", mod(fnBody(), wasmasm.Section(7, wasmasm.Vec(exportEntry("f", ExternFunc, 1)))), 0, "function 1", ErrMalformed},
		{"start past the index space", mod(fnBody(), wasmasm.Section(8, []byte{1})), 0, "function 1 of 1", ErrMalformed},
		{"start with trailing bytes", mod(fnBody(), wasmasm.Section(8, []byte{0, 0})), 0, "trailing", ErrMalformed},
		{"element past the index space", mod(fnBody(), wasmasm.Section(9, wasmasm.Vec([]byte{0x01, 0x00, 0x01, 0x05}))), 0, "function 5 of 1", ErrMalformed},
		{"element flags", mod(fnBody(), wasmasm.Section(9, wasmasm.Vec([]byte{0x08}))), 0, "flags", ErrMalformed},
		{"element kind", mod(fnBody(), wasmasm.Section(9, wasmasm.Vec([]byte{0x01, 0x01, 0x00}))), 0, "element segment of type", ErrUnsupported},
		{"truncated element section", mod(fnBody(), wasmasm.Section(9, []byte{0x01, 0x00, 0x41})), 0, "truncated", ErrMalformed},
		{"element count past the section", mod(fnBody(), wasmasm.Section(9, []byte{0x01, 0x01, 0x00, 0x7f})), 0, "truncated", ErrMalformed},
		{"unsupported opcode", mod(fnBody(0x1f, 0x40, 0x00, 0x0b)), 0, "opcode 0x1f", ErrUnsupported},
		{"code after the end", mod(fnBody(0x0b, 0x01)), 0, "after the function's end", ErrMalformed},
		{"budget 0", mod(fnBody()), 0, "budget", nil},
		{"budget too large", mod(fnBody()), maxWeight + 1, "budget", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			budget := tt.budget
			if budget == 0 && !strings.HasPrefix(tt.name, "budget") {
				budget = PreemptBudget
			}
			_, err := Preempt(tt.wasm, budget)
			if err == nil || !strings.Contains(err.Error(), tt.want) || tt.is != nil && !errors.Is(err, tt.is) {
				t.Fatalf("Preempt = %v, want an error with %q (is %v)", err, tt.want, tt.is)
			}
		})
	}
}

// bulkModule defines fill(n), which fills n bytes at 0 with 7 and the
// table's first n elements with null, and returns a local's value (its
// check's scratch local is the one after it), and byte(i), which reads a
// byte; with one memory page and a table of 16.
func bulkModule() []byte {
	fill := wasmasm.Cat([]byte{0x01, 0x01, 0x7f}, // one local i32
		[]byte{0x41, 0x2a, 0x21, 0x01},                               // local 1 = 42
		[]byte{0x41, 0x00, 0x41, 0x07, 0x20, 0x00, 0xfc, 0x0b, 0x00}, // memory.fill(0, 7, n)
		[]byte{0x41, 0x00, 0xd0, 0x70, 0x41, 0x10, 0xfc, 0x11, 0x00}, // table.fill(0, null, 16)
		[]byte{0x20, 0x01, 0x0b})                                     // local 1
	read := []byte{0x00, 0x20, 0x00, 0x2d, 0x00, 0x00, 0x0b} // i32.load8_u(i)
	return wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec(sigI32I32)),
		wasmasm.Section(3, wasmasm.Vec([]byte{0}, []byte{0})),
		wasmasm.Section(4, wasmasm.Vec([]byte{0x70, 0x00, 0x10})),
		wasmasm.Section(5, []byte{0x01, 0x00, 0x01}),
		wasmasm.Section(7, wasmasm.Vec(exportEntry("fill", ExternFunc, 0), exportEntry("byte", ExternFunc, 1))),
		wasmasm.Section(10, wasmasm.Vec(
			wasmasm.Cat(wasmasm.Uleb(uint64(len(fill))), fill),
			wasmasm.Cat(wasmasm.Uleb(uint64(len(read))), read))),
	)
}

// TestPreemptBulk charges a bulk operation its length: one unit per 16
// bytes, one per element.
func TestPreemptBulk(t *testing.T) {
	out, err := Preempt(bulkModule(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	var y yields
	m, err := preemptRuntime(t, &y).Instantiate(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	if got := call(t, m, "fill", 100); got != 42 {
		t.Errorf("fill returned local 1 = %d, want 42", got)
	}
	if got := call(t, m, "byte", 99); got != 7 {
		t.Errorf("byte 99 after fill(100) = %d, want 7", got)
	}
	if got := call(t, m, "byte", 100); got != 0 {
		t.Errorf("byte 100 after fill(100) = %d, want 0", got)
	}
	if y.n != 0 {
		t.Fatalf("%d yields for fill(100), want 0", y.n)
	}
	// 16,000 bytes are 1,000 units: the budget is spent at once.
	call(t, m, "fill", 16_000)
	if y.n != 1 {
		t.Errorf("%d yields for fill(16000) with a budget of 1000, want 1", y.n)
	}
	y.n = 0
	for range 20 {
		call(t, m, "fill", 1600) // 100 units and a few
	}
	if y.n < 1 || y.n > 2 {
		t.Errorf("%d yields for 20 fills of 1600 bytes, want 1 or 2", y.n)
	}
}

// sized is a code section entry: b with its size.
func sized(b []byte) []byte { return wasmasm.Cat(wasmasm.Uleb(uint64(len(b))), b) }

// TestPreemptCounts refuses a module whose counts overrun their section,
// each of which wazero would allocate for before finding out (the data
// section's crashed the process), and a function with too many locals.
func TestPreemptCounts(t *testing.T) {
	huge := []byte{0xff, 0xff, 0xff, 0xff, 0x0f}
	base := func(secs ...[]byte) []byte {
		all := [][]byte{
			wasmasm.Section(1, wasmasm.Vec(sigVoid)),
			wasmasm.Section(3, wasmasm.Vec([]byte{0})),
			wasmasm.Section(5, []byte{0x01, 0x00, 0x01}),
		}
		all = append(all, secs...)
		return wasmasm.Module(all...)
	}
	code := wasmasm.Section(10, wasmasm.Vec(fnBody()))
	for _, tt := range []struct {
		name string
		wasm []byte
	}{
		{"data segments", base(code, wasmasm.Section(11, huge))},
		{"data segment bytes", base(code, wasmasm.Section(11, wasmasm.Cat([]byte{0x01, 0x01}, huge)))},
		{"data without functions", wasmasm.Module(wasmasm.Section(5, []byte{0x01, 0x00, 0x01}), wasmasm.Section(11, huge))},
		{"element segments", base(wasmasm.Section(9, huge), code)},
		{"element items", base(wasmasm.Section(9, wasmasm.Cat([]byte{0x01, 0x01, 0x00}, huge)), code)},
		{"globals", base(wasmasm.Section(6, huge), code)},
		{"exports", base(wasmasm.Section(7, huge), code)},
		{"imports", base(wasmasm.Section(2, huge), code)},
		{"tags", base(code, wasmasm.Section(13, huge))},
		{"type parameters", wasmasm.Module(wasmasm.Section(1, wasmasm.Cat([]byte{0x01, 0x60}, huge)))},
		{"locals", base(wasmasm.Section(10, wasmasm.Vec(sized(wasmasm.Cat([]byte{0x01}, huge, []byte{0x7f, 0x0b})))))},
		{"function names", base(code, wasmasm.Section(0, wasmasm.Name("name"), []byte{0x01, 0x05}, huge))},
		{"locals past MaxLocals", base(wasmasm.Section(10, wasmasm.Vec(sized(wasmasm.Cat([]byte{0x02, 0x01, 0x7f}, wasmasm.Uleb(MaxLocals), []byte{0x7f, 0x0b})))))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Preempt(tt.wasm, PreemptBudget)
			if err == nil {
				t.Fatal("Preempt accepted it")
			}
			t.Log(err)
		})
	}
}

// TestPreemptNameSection refuses a name section it can not read (wazero
// refuses one too) and keeps other custom sections.
func TestPreemptNameSection(t *testing.T) {
	mod := func(custom ...[]byte) []byte {
		return wasmasm.Module(append([][]byte{
			wasmasm.Section(1, wasmasm.Vec(sigVoid)),
			wasmasm.Section(3, wasmasm.Vec([]byte{0})),
			wasmasm.Section(10, wasmasm.Vec(fnBody())),
		}, custom...)...)
	}
	producers := wasmasm.Section(0, wasmasm.Name("producers"), []byte{1, 2, 3})
	bad := wasmasm.Section(0, wasmasm.Name("name"), []byte{0x01, 0x05, 0x01, 0x00, 0x09, 'f'}) // a name overrunning its map
	if _, err := Preempt(mod(bad, producers), PreemptBudget); err == nil || !strings.Contains(err.Error(), "name section") {
		t.Errorf("Preempt with an unreadable name section = %v, want it refused", err)
	}
	out, err := Preempt(mod(producers), PreemptBudget)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, producers) {
		t.Errorf("producers section dropped")
	}
	if _, err := preemptRuntime(t, &yields{}).CompileModule(context.Background(), out); err != nil {
		t.Fatalf("rewritten module does not compile: %v", err)
	}
}

// FuzzPreempt: Preempt never panics; what it returns parses, and wazero
// accepts it when it accepts the module. The module itself is given to
// wazero only when Preempt accepted it: wazero allocates what a module's
// counts say before reading (the rewrite decodes every count for that
// reason, see Preempt), so a refused module could take the fuzzer down.
func FuzzPreempt(f *testing.F) {
	f.Add(preemptModule())
	f.Add(bulkModule())
	f.Add(growModule())
	f.Add(shapesModule([]byte{0x40, 0x00}))
	f.Add(shapesModule([]byte{0x03, 0x40, 0x0b}))
	f.Add(shapesModule([]byte{0x01}))
	r := wazeroRuntime(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, wasm []byte) {
		out, err := Preempt(wasm, 1000)
		if err != nil {
			return
		}
		if _, err := Parse(out); err != nil {
			t.Fatalf("rewritten module does not parse: %v", err)
		}
		cm, outErr := r.CompileModule(ctx, out)
		if outErr == nil {
			cm.Close(ctx)
		}
		cm, err = r.CompileModule(ctx, wasm)
		if err != nil {
			return
		}
		cm.Close(ctx)
		if outErr != nil {
			t.Fatalf("wazero compiles the module but not its rewrite: %v", outErr)
		}
	})
}
