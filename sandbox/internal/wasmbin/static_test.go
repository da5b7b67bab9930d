package wasmbin

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/wasmasm"
	"github.com/mandatevm/mandate/sandbox"
)

func static(t testing.TB, wasm []byte) (Stats, error) {
	t.Helper()
	m, err := Parse(wasm)
	if err != nil {
		return Stats{}, err
	}
	return Static(wasm, m)
}

// staticModule imports env.f and defines three functions (indices 1 to 3):
//
//	1 (param i32 i32), 3 declared locals in two runs, a block in a loop
//	  in an if (3 deep), a br_table of 2 labels and its default
//	2 no locals, a block, 9 bytes
//	3 (param i32), 500 locals in one run, nothing nested
func staticModule() []byte {
	f1 := wasmasm.Cat([]byte{0x02, 0x01, 0x7f, 0x02, 0x7e}, // locals: 1 i32, 2 i64
		[]byte{0x20, 0x00, 0x04, 0x40},                   // local.get 0; if
		[]byte{0x03, 0x40, 0x02, 0x40},                   //   loop; block
		[]byte{0x20, 0x01, 0x0e, 0x02, 0x00, 0x01, 0x02}, // br_table 0 1 2
		[]byte{0x0b, 0x0b, 0x0b, 0x0b})                   // end end end end
	f2 := []byte{0x00, 0x02, 0x40, 0x01, 0x0b, 0x01, 0x01, 0x01, 0x0b}
	f3 := wasmasm.Cat([]byte{0x01}, wasmasm.Uleb(500), []byte{0x7f, 0x0b})
	withLen := func(b []byte) []byte { return wasmasm.Cat(wasmasm.Uleb(uint64(len(b))), b) }
	return wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec(sigVoid, []byte{0x60, 0x02, 0x7f, 0x7f, 0x00}, []byte{0x60, 0x01, 0x7f, 0x00})),
		wasmasm.Section(2, wasmasm.Vec(wasmasm.Cat(wasmasm.Name("env"), wasmasm.Name("f"), []byte{ExternFunc, 0}))),
		wasmasm.Section(3, wasmasm.Vec([]byte{1}, []byte{0}, []byte{2})),
		wasmasm.Section(5, []byte{0x01, 0x00, 0x01}),
		wasmasm.Section(10, wasmasm.Vec(withLen(f1), withLen(f2), withLen(f3))),
	)
}

func TestStatic(t *testing.T) {
	st, err := static(t, staticModule())
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{
		Functions:      3,
		Locals:         Stat{501, 3},
		Nesting:        Stat{3, 1},
		BrTableTargets: Stat{3, 1},
		BodySize:       Stat{24, 1},
	}
	if st != want {
		t.Errorf("Static = %+v, want %+v", st, want)
	}
	if err := st.Check(sandbox.StaticLimits{}); err != nil {
		t.Errorf("Check(defaults) = %v", err)
	}

	// No function at all.
	st, err = static(t, wasmasm.Module(wasmasm.Section(5, []byte{0x01, 0x00, 0x01})))
	if err != nil {
		t.Fatal(err)
	}
	if st.Functions != 0 || st.Locals.Func != -1 || st.BodySize.Value != 0 {
		t.Errorf("Static(no functions) = %+v", st)
	}
}

func TestStaticCheck(t *testing.T) {
	st, err := static(t, staticModule())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		limits sandbox.StaticLimits
		want   string
	}{
		{sandbox.StaticLimits{Functions: 2}, "the module defines 3 functions; the limit (limits { functions }) is 2"},
		{sandbox.StaticLimits{Locals: 500}, "function 3 has 501 locals; the limit (limits { locals }) is 500"},
		{sandbox.StaticLimits{Nesting: 2}, "function 1 nests blocks 3 deep; the limit (limits { nesting }) is 2"},
		{sandbox.StaticLimits{BrTableTargets: 2}, "function 1 has a br_table of 3 targets; the limit (limits { br_table_targets }) is 2"},
		{sandbox.StaticLimits{BodySize: 23}, "function 1 has a body of 24 bytes; the limit (limits { function_size }) is 23 bytes"},
	} {
		err := st.Check(tt.limits)
		if !errors.Is(err, sandbox.ErrStaticLimit) || !strings.HasSuffix(err.Error(), ": "+tt.want) {
			t.Errorf("Check(%+v) = %v, want ErrStaticLimit: %s", tt.limits, err, tt.want)
		}
	}
	// At the limit is within it.
	if err := st.Check(sandbox.StaticLimits{Functions: 3, Locals: 501, Nesting: 3, BrTableTargets: 3, BodySize: 24}); err != nil {
		t.Errorf("Check(at the limits) = %v", err)
	}
}

// TestStaticBombs: every compile bomb of issue 24 is refused by the
// default limits, naming the limit, in well under a second.
func TestStaticBombs(t *testing.T) {
	for _, b := range wasmasm.Bombs {
		t.Run(b.Name, func(t *testing.T) {
			wasm := b.Wasm()
			start := time.Now()
			st, err := static(t, wasm)
			if err != nil {
				t.Fatalf("Static: %v", err)
			}
			err = st.Check(sandbox.StaticLimits{})
			elapsed := time.Since(start)
			if !errors.Is(err, sandbox.ErrStaticLimit) || !strings.Contains(err.Error(), "(limits { "+b.Limit+" })") {
				t.Fatalf("Check = %v, want the %s limit", err, b.Limit)
			}
			t.Logf("%d bytes, %v: %v", len(wasm), elapsed, err) // its cost: BenchmarkStaticCheck
		})
	}
}

func TestStaticShapes(t *testing.T) {
	for _, tt := range []struct {
		name string
		wasm []byte
		want Stats
	}{
		{"nested loops", wasmasm.NestedLoops(700), Stats{Functions: 1, Nesting: Stat{700, 0}}},
		{"nested blocks", wasmasm.NestedBlocks(5), Stats{Functions: 1, Nesting: Stat{5, 0}}},
		{"br_table", wasmasm.BrTable(300), Stats{Functions: 1, Nesting: Stat{1, 0}, BrTableTargets: Stat{301, 0}}},
		{"functions", wasmasm.Functions(1000), Stats{Functions: 1000}},
		{"locals", wasmasm.Locals(3, 1<<20), Stats{Functions: 3, Locals: Stat{1 << 20, 0}}},
		{"straight line", wasmasm.StraightLine(3000), Stats{Functions: 1}},
	} {
		st, err := static(t, tt.wasm)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if st.Functions != tt.want.Functions || st.Nesting.Value != tt.want.Nesting.Value ||
			st.BrTableTargets.Value != tt.want.BrTableTargets.Value || st.Locals.Value != tt.want.Locals.Value {
			t.Errorf("%s: Static = %+v, want %+v", tt.name, st, tt.want)
		}
	}
	// Locals are counted from their run lengths: 2^32-1 locals in two
	// runs is a count, not an allocation; one more is malformed.
	huge := wasmasm.Command(1, wasmasm.Cat([]byte{2}, wasmasm.Uleb(1<<31), []byte{0x7f}, wasmasm.Uleb(1<<31-1), []byte{0x7e, 0x0b}))
	if st, err := static(t, huge); err != nil || st.Locals.Value != 1<<32-1 {
		t.Errorf("Static(2^32-1 locals) = %+v, %v", st.Locals, err)
	}
	over := wasmasm.Command(1, wasmasm.Cat([]byte{2}, wasmasm.Uleb(1<<31), []byte{0x7f}, wasmasm.Uleb(1<<31), []byte{0x7e, 0x0b}))
	if _, err := static(t, over); !errors.Is(err, ErrMalformed) {
		t.Errorf("Static(2^32 locals) = %v, want ErrMalformed", err)
	}
}

func TestStaticMalformed(t *testing.T) {
	good := staticModule()
	for _, tt := range []struct {
		name string
		wasm []byte
	}{
		{"code after the end", wasmasm.Command(1, []byte{0, 0x0b, 0x01, 0x0b})},
		{"unknown opcode", wasmasm.Command(1, []byte{0, 0x06, 0x0b})},
		{"bodies and functions disagree", wasmasm.Module(
			wasmasm.Section(1, wasmasm.Vec(sigVoid)),
			wasmasm.Section(3, wasmasm.Vec([]byte{0}, []byte{0})),
			wasmasm.Section(10, wasmasm.Vec(fnBody()))),
		},
		{"no code section", wasmasm.Module(
			wasmasm.Section(1, wasmasm.Vec(sigVoid)),
			wasmasm.Section(3, wasmasm.Vec([]byte{0})))},
		{"function of an unknown type", wasmasm.Module(
			wasmasm.Section(1, wasmasm.Vec(sigVoid)),
			wasmasm.Section(3, wasmasm.Vec([]byte{1})),
			wasmasm.Section(10, wasmasm.Vec(fnBody())))},
		{"br_table past the body", wasmasm.Command(1, []byte{0, 0x41, 0x00, 0x0e, 0x7f, 0x0b})},
		{"truncated", good[:len(good)-3]},
	} {
		if _, err := static(t, tt.wasm); err == nil {
			t.Errorf("%s: Static accepted it", tt.name)
		}
	}
}

// FuzzStatic: Static never panics; what it counts is bounded by the
// module's size (but locals, counted from run lengths); and it reads every
// module Preempt, which decodes the same way, reads. (Comparing with an
// engine's validation instead would make the fuzzer compile the bombs
// Static exists to refuse.)
func FuzzStatic(f *testing.F) {
	f.Add(staticModule())
	f.Add(preemptModule())
	f.Add(bulkModule())
	f.Add(growModule())
	f.Add(shapesModule([]byte{0x40, 0x00}))
	f.Add(wasmasm.NestedLoops(20))
	f.Add(wasmasm.NestedBlocks(20))
	f.Add(wasmasm.BrTable(20))
	f.Add(wasmasm.Functions(20))
	f.Add(wasmasm.Locals(2, 1<<30))
	f.Add(wasmasm.StraightLine(60))
	f.Fuzz(func(t *testing.T, wasm []byte) {
		m, err := Parse(wasm)
		if err != nil {
			return
		}
		st, err := Static(wasm, m)
		if err != nil {
			if _, perr := Preempt(wasm, 1000); perr == nil {
				t.Fatalf("Preempt reads the module, Static refuses it: %v", err)
			}
			return
		}
		for _, v := range []int{st.Functions, st.Nesting.Value, st.BrTableTargets.Value, st.BodySize.Value} {
			if v < 0 || v > len(wasm) {
				t.Fatalf("Stats %+v past the module's %d bytes", st, len(wasm))
			}
		}
		if st.Locals.Value < 0 || st.Locals.Value > 1<<33 {
			t.Fatalf("Stats.Locals = %d", st.Locals.Value)
		}
	})
}

// BenchmarkStaticCheck: the check (Parse, Static, Check) on the
// repository's largest Go guest (examples/bank/bankd, 11 MB) and on each
// of issue 24's compile bombs.
//
//	go test ./sandbox/internal/wasmbin/ -run '^$' -bench StaticCheck
func BenchmarkStaticCheck(b *testing.B) {
	check := func(b *testing.B, wasm []byte, refused bool) {
		b.SetBytes(int64(len(wasm)))
		b.ReportAllocs()
		for b.Loop() {
			m, err := Parse(wasm)
			if err != nil {
				b.Fatal(err)
			}
			st, err := Static(wasm, m)
			if err != nil {
				b.Fatal(err)
			}
			if err := st.Check(sandbox.StaticLimits{}); (err != nil) != refused {
				b.Fatalf("Check = %v", err)
			}
		}
	}
	b.Run("go_guest_bankd", func(b *testing.B) {
		wasm, _, err := guestbuild.Build(context.Background(), filepath.Join("..", "..", "..", "examples", "bank", "bankd"), guestbuild.Options{})
		if err != nil {
			b.Skip(err)
		}
		check(b, wasm, false)
	})
	for _, bomb := range wasmasm.Bombs {
		wasm := bomb.Wasm()
		b.Run(strings.NewReplacer(" ", "_", ",", "").Replace(bomb.Name), func(b *testing.B) { check(b, wasm, true) })
	}
}
