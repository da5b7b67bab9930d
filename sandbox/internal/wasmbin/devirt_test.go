package wasmbin

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/mandatevm/mandate/internal/wasmasm"
)

// devirtModule is a module with one import and a table the element
// segments fill with functions of three types, one of them twice under two
// indices; callA, callA3 and callB call through the table with
// call_indirect of types (i32)->i32, its twin and ()->i32:
//
//	types 0 (i32)->i32, 1 (i32 i32)->i32, 2 ()->i32, 3 (i32)->i32 again, 4 (i32)->i32 for callB
//	func 0 env.f: ()->i32, returns 7     func 3 seven: ()->i32, returns 42
//	func 1 inc: x+1                        func 4 callA(idx, x), 5 callA3(idx, x), 6 callB(idx)
//	func 2 dbl (type 3): x*2
//	table of 8; segments: at 2 [inc dbl seven env.f], at 4 [inc], at 7 [dbl]
//	so the table is: -, -, inc, dbl, inc, env.f, -, dbl
//
// change, when not nil, is given each section by id and returns what to
// write instead (the refusal cases).
func devirtModule(change func(id byte, p []byte) []byte) []byte {
	body := func(code ...byte) []byte { return wasmasm.Cat(wasmasm.Uleb(uint64(len(code))), code) }
	sections := map[byte][]byte{
		1: wasmasm.Vec(sigI32I32, []byte{0x60, 0x02, 0x7f, 0x7f, 0x01, 0x7f}, sigVoidI32, sigI32I32, sigI32I32),
		2: wasmasm.Vec(wasmasm.Cat(wasmasm.Name("env"), wasmasm.Name("f"), []byte{ExternFunc, 2})),
		3: wasmasm.Vec([]byte{0}, []byte{3}, []byte{2}, []byte{1}, []byte{1}, []byte{4}),
		4: wasmasm.Vec([]byte{0x70, 0x00, 0x08}),
		5: []byte{0x01, 0x00, 0x01},
		7: wasmasm.Vec(exportEntry("callA", ExternFunc, 4), exportEntry("callA3", ExternFunc, 5), exportEntry("callB", ExternFunc, 6)),
		9: wasmasm.Vec(
			[]byte{0x00, 0x41, 0x02, 0x0b, 0x04, 0x01, 0x02, 0x03, 0x00},
			[]byte{0x00, 0x41, 0x04, 0x0b, 0x01, 0x01},
			[]byte{0x00, 0x41, 0x07, 0x0b, 0x01, 0x02}),
		10: wasmasm.Vec(
			body(0x00, 0x20, 0x00, 0x41, 0x01, 0x6a, 0x0b),                   // inc
			body(0x00, 0x20, 0x00, 0x41, 0x02, 0x6c, 0x0b),                   // dbl
			body(0x00, 0x41, 0x2a, 0x0b),                                     // seven (42)
			body(0x00, 0x20, 0x01, 0x20, 0x00, 0x11, 0x00, 0x00, 0x0b),       // callA
			body(0x00, 0x20, 0x01, 0x20, 0x00, 0x11, 0x03, 0x00, 0x0b),       // callA3
			body(0x00, 0x20, 0x00, 0x11, 0x02, 0x00, 0x41, 0x01, 0x6a, 0x0b), // callB: table[idx]() + 1
		),
	}
	var out [][]byte
	for _, id := range []byte{1, 2, 3, 4, 5, 6, 7, 9, 10} {
		p, ok := sections[id]
		if change != nil {
			p = change(id, p)
			ok = ok || p != nil
		}
		if ok {
			out = append(out, wasmasm.Section(id, p))
		}
	}
	return wasmasm.Module(out...)
}

// TestDevirtualizeSameResults calls through the table at every index, in
// and out of it, on the module and its rewrite (alone and after Preempt,
// as the engine applies it): the same function answers, and an index that
// held no function or one of another type traps in both.
func TestDevirtualizeSameResults(t *testing.T) {
	ctx := context.Background()
	orig := devirtModule(nil)
	out, ok := Devirtualize(orig)
	if !ok {
		t.Fatal("Devirtualize refused the module")
	}
	m, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	if m.Tables != 0 {
		t.Errorf("rewrite defines %d tables, want none", m.Tables)
	}
	pre, err := Preempt(orig, 1000)
	if err != nil {
		t.Fatal(err)
	}
	both, ok := Devirtualize(pre)
	if !ok {
		t.Fatal("Devirtualize refused the preempted module")
	}
	r := preemptRuntime(t, &yields{})
	inst := map[string]api.Module{}
	for name, wasm := range map[string][]byte{"original": orig, "devirtualized": out, "preempted": both} {
		mod, err := r.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName(name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		inst[name] = mod
	}
	outcome := func(m api.Module, fn string, args ...uint64) string {
		res, err := m.ExportedFunction(fn).Call(ctx, args...)
		if err != nil {
			return "trap"
		}
		return fmt.Sprint(res[0])
	}
	indices := []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1 << 31, 1<<32 - 1}
	traps, calls := 0, 0
	for _, idx := range indices {
		for _, c := range []struct {
			fn   string
			args []uint64
		}{{"callA", []uint64{idx, 10}}, {"callA3", []uint64{idx, 10}}, {"callB", []uint64{idx}}} {
			want := outcome(inst["original"], c.fn, c.args...)
			if want == "trap" {
				traps++
			} else {
				calls++
			}
			for _, name := range []string{"devirtualized", "preempted"} {
				if got := outcome(inst[name], c.fn, c.args...); got != want {
					t.Errorf("%s: %s%v = %s, want %s (the original's)", name, c.fn, c.args, got, want)
				}
			}
		}
	}
	// The module must exercise both: a test where nothing traps, or
	// nothing is called, proves nothing.
	if traps == 0 || calls < 6 {
		t.Fatalf("%d calls and %d traps in the original: the module does not test what it should", calls, traps)
	}
	if got := outcome(inst["original"], "callB", 5); got != "8" {
		t.Errorf("callB(5) = %s, want 8 (the import through the table)", got)
	}
}

// TestDevirtualizeRefuses: a module whose table something else could
// reach is returned unchanged.
func TestDevirtualizeRefuses(t *testing.T) {
	for name, change := range map[string]func(id byte, p []byte) []byte{
		"table exported": func(id byte, p []byte) []byte {
			if id == 7 {
				return appendEntry(p, 3, exportEntry("t", ExternTable, 0))
			}
			return p
		},
		"two tables": func(id byte, p []byte) []byte {
			if id == 4 {
				return wasmasm.Vec([]byte{0x70, 0x00, 0x08}, []byte{0x70, 0x00, 0x01})
			}
			return p
		},
		"passive segment": func(id byte, p []byte) []byte {
			if id == 9 {
				return appendEntry(p, 3, []byte{0x01, 0x00, 0x01, 0x01})
			}
			return p
		},
		"offset from a global": func(id byte, p []byte) []byte {
			switch id {
			case 6:
				return wasmasm.Vec([]byte{0x7f, 0x00, 0x41, 0x02, 0x0b})
			case 9:
				return wasmasm.Vec([]byte{0x00, 0x23, 0x00, 0x0b, 0x01, 0x01})
			}
			return p
		},
		"ref.func in a global": func(id byte, p []byte) []byte {
			if id == 6 {
				return wasmasm.Vec([]byte{0x70, 0x00, 0xd2, 0x01, 0x0b})
			}
			return p
		},
		"table.get": func(id byte, p []byte) []byte {
			return replaceBody(id, p, []byte{0x00, 0x20, 0x00, 0x25, 0x00, 0xd1, 0x0b}) // ref.is_null (table.get 0 idx)
		},
		"table.size": func(id byte, p []byte) []byte {
			return replaceBody(id, p, []byte{0x00, 0xfc, 0x10, 0x00, 0x0b})
		},
		"table.grow": func(id byte, p []byte) []byte {
			return replaceBody(id, p, []byte{0x00, 0xd0, 0x70, 0x41, 0x01, 0xfc, 0x0f, 0x00, 0x0b})
		},
		"ref.func": func(id byte, p []byte) []byte {
			return replaceBody(id, p, []byte{0x00, 0xd2, 0x01, 0xd1, 0x0b})
		},
	} {
		t.Run(name, func(t *testing.T) {
			wasm := devirtModule(change)
			if _, err := wazeroRuntime(t).CompileModule(context.Background(), wasm); err != nil {
				t.Fatalf("the test's module is invalid: %v", err)
			}
			out, ok := Devirtualize(wasm)
			if ok || !bytes.Equal(out, wasm) {
				t.Errorf("Devirtualize = %v, changed: %t; want the module unchanged", ok, !bytes.Equal(out, wasm))
			}
		})
	}
}

// replaceBody returns the code section p (id 10) with callB's body, of
// type (i32)->i32, replaced by code.
func replaceBody(id byte, p []byte, code []byte) []byte {
	if id != 10 {
		return p
	}
	r := &reader{b: p}
	n, _ := r.u32()
	for range n - 1 {
		size, _ := r.u32()
		r.off += int(size)
	}
	out := append([]byte(nil), p[:r.off]...)
	return append(append(out, wasmasm.Uleb(uint64(len(code)))...), code...)
}

// TestDevirtualizeKeepsInvalid: a module wazero refuses stays refused.
// The rewrite drops the table and every call_indirect, so an invalid
// table or a call_indirect of a table the module does not have would
// otherwise vanish with them, and the module would run.
func TestDevirtualizeKeepsInvalid(t *testing.T) {
	ctx := context.Background()
	r := wazeroRuntime(t)
	for name, change := range map[string]func(id byte, p []byte) []byte{
		"call_indirect of table 1": func(id byte, p []byte) []byte {
			return replaceBody(id, p, []byte{0x00, 0x20, 0x00, 0x11, 0x02, 0x01, 0x0b})
		},
		"table max below its min": func(id byte, p []byte) []byte {
			if id == 4 {
				return wasmasm.Vec([]byte{0x70, 0x01, 0x08, 0x02})
			}
			return p
		},
	} {
		t.Run(name, func(t *testing.T) {
			wasm := devirtModule(change)
			if _, err := r.CompileModule(ctx, wasm); err == nil {
				t.Fatal("the test's module is valid: it tests nothing")
			}
			out, ok := Devirtualize(wasm)
			if _, err := r.CompileModule(ctx, out); ok && err == nil {
				t.Error("Devirtualize made a module wazero refuses into one it accepts")
			}
		})
	}
}

// TestDevirtualizeNoIndirectCalls: a table nothing calls through is
// dropped, and its functions still run; a module without a table is not
// one Devirtualize applies to.
func TestDevirtualizeNoIndirectCalls(t *testing.T) {
	ctx := context.Background()
	wasm := wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec(sigI32I32)),
		wasmasm.Section(3, wasmasm.Vec([]byte{0})),
		wasmasm.Section(4, wasmasm.Vec([]byte{0x70, 0x00, 0x02})),
		wasmasm.Section(7, wasmasm.Vec(exportEntry("inc", ExternFunc, 0))),
		wasmasm.Section(9, wasmasm.Vec([]byte{0x00, 0x41, 0x01, 0x0b, 0x01, 0x00})),
		wasmasm.Section(10, wasmasm.Vec([]byte{0x07, 0x00, 0x20, 0x00, 0x41, 0x01, 0x6a, 0x0b})))
	out, ok := Devirtualize(wasm)
	if !ok {
		t.Fatal("Devirtualize refused the module")
	}
	if m, err := Parse(out); err != nil || m.Tables != 0 {
		t.Fatalf("Parse = %v, %v; want no table", m, err)
	}
	mod, err := wazeroRuntime(t).Instantiate(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	if got := call(t, mod, "inc", 41); got != 42 {
		t.Errorf("inc(41) = %d, want 42", got)
	}
	plain := wasmasm.Module(wasmasm.Section(1, wasmasm.Vec(sigVoid)), wasmasm.Section(3, wasmasm.Vec([]byte{0})),
		wasmasm.Section(10, wasmasm.Vec([]byte{0x02, 0x00, 0x0b})))
	if out, ok := Devirtualize(plain); ok || !bytes.Equal(out, plain) {
		t.Errorf("Devirtualize of a module without a table = %v, want it unchanged", ok)
	}
}

// FuzzDevirtualize: Devirtualize never panics, and wazero accepts what it
// returns when it accepts what it was given (a module Preempt accepted
// first, as in the engine: Preempt decodes every count before wazero
// allocates for it).
func FuzzDevirtualize(f *testing.F) {
	f.Add(devirtModule(nil))
	f.Add(preemptModule())
	f.Add(shapesModule([]byte{0x40, 0x00}))
	r := wazeroRuntime(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, wasm []byte) {
		pre, err := Preempt(wasm, 1000)
		if err != nil {
			return
		}
		out, ok := Devirtualize(pre)
		if !ok {
			if !bytes.Equal(out, pre) {
				t.Fatal("Devirtualize refused the module but changed it")
			}
			return
		}
		cm, outErr := r.CompileModule(ctx, out)
		if outErr == nil {
			cm.Close(ctx)
		}
		cm, err = r.CompileModule(ctx, pre)
		if err != nil {
			if outErr == nil {
				t.Fatalf("wazero refuses the module (%v) but accepts its rewrite", err)
			}
			return
		}
		cm.Close(ctx)
		if outErr != nil {
			t.Fatalf("wazero compiles the module but not its rewrite: %v", outErr)
		}
	})
}

// BenchmarkIndirectCall is one call through the table (of the function
// "inc", at index 2 of devirtModule's table) in a loop, with the table
// (call_indirect) and devirtualized (a call of the dispatch function and
// its br_table), both preempted as the engine compiles them: ns/op is one
// call.
func BenchmarkIndirectCall(b *testing.B) {
	ctx := context.Background()
	// loop(n): acc = 0; do acc = table[2](acc) while --n; acc
	loop := []byte{0x01, 0x01, 0x7f, // one local: acc
		0x03, 0x40, // loop
		0x20, 0x01, 0x41, 0x02, 0x11, 0x00, 0x00, 0x21, 0x01, // acc = call_indirect 0 (acc, 2)
		0x20, 0x00, 0x41, 0x01, 0x6b, 0x22, 0x00, 0x0d, 0x00, // br_if 0 (n = n-1)
		0x0b, 0x20, 0x01, 0x0b}
	wasm := devirtModule(func(id byte, p []byte) []byte {
		if id == 7 {
			return wasmasm.Vec(exportEntry("loop", ExternFunc, 6))
		}
		return replaceBody(id, p, loop)
	})
	pre, err := Preempt(wasm, PreemptBudget)
	if err != nil {
		b.Fatal(err)
	}
	direct, ok := Devirtualize(pre)
	if !ok {
		b.Fatal("Devirtualize refused the module")
	}
	for _, bc := range []struct {
		name string
		wasm []byte
	}{{"table", pre}, {"direct", direct}} {
		b.Run(bc.name, func(b *testing.B) {
			r := preemptRuntime(b, &yields{})
			mod, err := r.Instantiate(ctx, bc.wasm)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			res, err := mod.ExportedFunction("loop").Call(ctx, uint64(b.N))
			if err != nil || res[0] != uint64(uint32(b.N)) {
				b.Fatalf("loop(%d) = %v, %v", b.N, res, err)
			}
		})
	}
}

// TestDevirtualizeOnlyImports: a table of imported functions in a module
// that defines none, and no segment at all: still a valid module without
// its table.
func TestDevirtualizeOnlyImports(t *testing.T) {
	for name, wasm := range map[string][]byte{
		"imports": wasmasm.Module(
			wasmasm.Section(1, wasmasm.Vec(sigVoidI32)),
			wasmasm.Section(2, wasmasm.Vec(wasmasm.Cat(wasmasm.Name("env"), wasmasm.Name("f"), []byte{ExternFunc, 0}))),
			wasmasm.Section(4, wasmasm.Vec([]byte{0x70, 0x00, 0x02})),
			wasmasm.Section(9, wasmasm.Vec([]byte{0x00, 0x41, 0x01, 0x0b, 0x01, 0x00}))),
		"no segments": wasmasm.Module(wasmasm.Section(4, wasmasm.Vec([]byte{0x70, 0x00, 0x02}))),
	} {
		t.Run(name, func(t *testing.T) {
			out, ok := Devirtualize(wasm)
			if !ok {
				t.Fatal("Devirtualize refused the module")
			}
			if _, err := preemptRuntime(t, &yields{}).CompileModule(context.Background(), out); err != nil {
				t.Fatalf("wazero refuses the rewrite: %v", err)
			}
		})
	}
}
