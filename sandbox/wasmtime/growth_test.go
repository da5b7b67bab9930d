//go:build wasmtime

package wasmtime

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	wt "github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/internal/wasmbin"
	"github.com/mandatevm/mandate/sandbox/sandboxtest"
)

// The conformance suite (TestConformance/RefusedGrowth) checks that a huge
// refused growth far below the limit is reported and a guest only saying
// "out of memory" is not; TestConformance/MemoryLimit a Go memory bomb.

// runGrowth compiles g and runs it under limit.
func runGrowth(t *testing.T, e *Engine, g sandboxtest.GrowthGuest, limit uint64) error {
	t.Helper()
	ctx := context.Background()
	m, err := e.Compile(ctx, sandboxtest.GrowthModule(g))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	return m.Run(ctx, sandbox.RunConfig{MemoryLimit: limit, Timeout: time.Minute})
}

// TestRefusedGrowthBoundary grows to exactly the limit, one page past it,
// and past 4 GiB.
func TestRefusedGrowthBoundary(t *testing.T) {
	e := newTestEngine(t, sandbox.Config{}, options{})
	const limit = 64 << 20 // 1,024 pages
	for _, tt := range []struct {
		grow      uint32
		wantLimit bool
	}{
		{1023, false}, // to exactly 64 MiB: granted
		{1024, true},  // one page past
		{1<<16 - 1, true},
		{1<<32 - 1, true}, // past 4 GiB, and 32 bits
	} {
		err := runGrowth(t, e, sandboxtest.GrowthGuest{Pages: 1, Grow: tt.grow, Exit: 2}, limit)
		var ee *sandbox.ExitError
		if !errors.As(err, &ee) || ee.Code != 2 || errors.Is(err, sandbox.ErrMemoryLimit) != tt.wantLimit {
			t.Errorf("grow %d pages: Run = %v, want *ExitError{Code: 2}, memory limit %v", tt.grow, err, tt.wantLimit)
		}
	}
}

// TestRefusedGrowthCached runs a module loaded from the disk cache, which is
// not rewritten again: the compiled code still records the refusal.
func TestRefusedGrowthCached(t *testing.T) {
	dir := t.TempDir()
	g := sandboxtest.GrowthGuest{Pages: 64, Grow: 3200, Exit: 2}
	for i := range 2 {
		e := newTestEngine(t, sandbox.Config{CacheDir: dir}, options{})
		if err := runGrowth(t, e, g, 64<<20); !errors.Is(err, sandbox.ErrMemoryLimit) {
			t.Errorf("run %d: Run = %v, want ErrMemoryLimit", i, err)
		}
		if i == 0 && len(cacheFiles(t, e)) != 1 {
			t.Fatal("the module was not cached")
		}
	}
}

func cacheFiles(t *testing.T, e *Engine) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(e.cache.dir, "*.cwasm"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestReservedExport refuses a module exporting the global the engine
// reads: a guest could otherwise claim a refused growth.
func TestReservedExport(t *testing.T) {
	e := newTestEngine(t, sandbox.Config{}, options{})
	for _, mem := range []string{"(memory 1)", "(memory i64 1)"} {
		wasm, err := wt.Wat2Wasm(`(module ` + mem + `
			(global (export "mandate$grow_refused") (mut i64) (i64.const 100000))
			(func (export "run") unreachable))`)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Compile(context.Background(), wasm); err == nil || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("%s: Compile = %v, want an error about the reserved name", mem, err)
		}
	}
}

// proposalsWAT uses each proposal the engine enables, with a memory.grow
// in five functions; "run" calls them all, then asks for 200 MiB and traps.
const proposalsWAT = `(module
  (memory 1)
  (table $t 4 funcref)
  (table $e 2 externref)
  (elem $seg func $f $g)
  (elem declare func $h)
  (data $d "hello")
  (global $gl (mut i32) (i32.const 0))
  (func $f (param i32) (result i32) (memory.grow (local.get 0)))
  (func $g (param i32) (result i32) (return_call $f (local.get 0)))
  (func $h (param i32) (result i32)
    (return_call_indirect $t (param i32) (result i32) (local.get 0) (i32.const 0)))
  (func $simd (param i32) (result i32) (local v128)
    (local.set 1 (v128.const i32x4 0x40 0x40 0x40 0x40))
    (drop (i32x4.extract_lane 3
      (i8x16.shuffle 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 (local.get 1) (local.get 1))))
    (v128.store offset=64 (i32.const 0) (v128.load offset=64 align=4 (i32.const 0)))
    (drop (v128.load8_lane offset=64 15 (i32.const 0) (local.get 1)))
    (v128.store64_lane offset=64 1 (i32.const 0) (local.get 1))
    (drop (v128.load32_zero offset=64 (i32.const 0)))
    (drop (f32x4.relaxed_madd (local.get 1) (local.get 1) (local.get 1)))
    (drop (i32x4.relaxed_trunc_f32x4_s (local.get 1)))
    (drop (i32x4.relaxed_dot_i8x16_i7x16_add_s (local.get 1) (local.get 1) (local.get 1)))
    (drop (i16x8.abs (local.get 1)))
    (drop (f64x2.convert_low_i32x4_u (local.get 1)))
    (drop (v128.any_true (local.get 1)))
    (memory.grow (local.get 0)))
  (func $atomics (param i32) (result i32)
    (drop (i32.atomic.rmw.add offset=64 (i32.const 0) (i32.const 1)))
    (drop (i64.atomic.rmw32.cmpxchg_u offset=64 (i32.const 0) (i64.const 1) (i64.const 2)))
    (drop (memory.atomic.notify (i32.const 0) (i32.const 1)))
    (atomic.fence)
    (i64.atomic.store offset=8 (i32.const 0) (i64.const 0x4040404040))
    (memory.grow (local.get 0)))
  (func $bulk (param i32) (result i32)
    (memory.copy (i32.const 0) (i32.const 64) (i32.const 1))
    (memory.fill (i32.const 0) (i32.const 64) (i32.const 1))
    (memory.init $d (i32.const 0) (i32.const 0) (i32.const 1))
    (data.drop $d)
    (table.init $t $seg (i32.const 0) (i32.const 0) (i32.const 2))
    (elem.drop $seg)
    (table.copy $t $t (i32.const 1) (i32.const 0) (i32.const 1))
    (drop (table.grow $t (ref.null func) (i32.const 1)))
    (drop (table.size $e))
    (table.fill $t (i32.const 2) (ref.func $h) (i32.const 1))
    (table.set $e (i32.const 0) (ref.null extern))
    (drop (ref.is_null (table.get $t (i32.const 0))))
    (drop (i32.trunc_sat_f64_u (f64.const 64.0)))
    (drop (i64.extend32_s (i64.const -64)))
    (drop (f32.const 2.0))
    (drop (i64.const 0x4000400040004000))
    (memory.grow (local.get 0)))
  (func $control (param i32) (result i32)
    (local.get 0)
    (block (param i32) (result i32 i32) (i32.const 64))
    (drop) (drop)
    (drop (select (result i32) (i32.const 1) (i32.const 2) (local.get 0)))
    (block $a (block $b (br_table $a $b $a (local.get 0))))
    (if (local.get 0) (then nop) (else nop))
    (loop $l (br_if $l (i32.const 0)))
    (drop (call_indirect $t (param i32) (result i32) (i32.const 1) (i32.const 0)))
    (global.set $gl (global.get $gl))
    (drop (memory.size))
    (memory.grow (local.get 0)))
  (func (export "run")
    (drop (call $bulk (i32.const 0)))
    (drop (call $simd (i32.const 0)))
    (drop (call $atomics (i32.const 0)))
    (drop (call $control (i32.const 0)))
    (drop (call $g (i32.const 0)))
    (drop (call $f (i32.const 3200)))
    unreachable))`

// TestTrackGrowthProposals rewrites a module using every proposal the
// engine enables: each memory.grow is found, wasmtime validates the result,
// and the refused growth is reported.
func TestTrackGrowthProposals(t *testing.T) {
	wasm, err := wt.Wat2Wasm(proposalsWAT)
	if err != nil {
		t.Fatal(err)
	}
	out, n, err := wasmbin.TrackGrowth(wasm)
	if err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Errorf("TrackGrowth replaced %d memory.grow, want 5", n)
	}
	eng := wt.NewEngine()
	defer eng.Close()
	mod, err := wt.NewModule(eng, out)
	if err != nil {
		t.Fatalf("wasmtime refuses the rewritten module: %v", err)
	}
	mod.Close()

	e := newTestEngine(t, sandbox.Config{}, options{})
	ctx := context.Background()
	m, err := e.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	err = m.Run(ctx, sandbox.RunConfig{MemoryLimit: 64 << 20, Timeout: time.Minute})
	var ee *sandbox.ExitError
	if !errors.As(err, &ee) || ee.Trap == "" || !errors.Is(err, sandbox.ErrMemoryLimit) {
		t.Fatalf("Run = %v, want a trap wrapping ErrMemoryLimit", err)
	}
}

// TestTrackGrowthRefusesUnknown refuses, with a clear error, a module
// whose code the rewrite can not decode (the static check, which decodes
// it first, refuses it before the rewrite).
func TestTrackGrowthRefusesUnknown(t *testing.T) {
	// A body of "i32.const 0; 0xfc 0x13 (i64.add128, not enabled); drop;
	// end" in a module with a memory.
	wasm, err := wt.Wat2Wasm(`(module (memory 1) (func (export "run") (drop (memory.grow (i32.const 1)))))`)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(wasm), "\x40\x00") // memory.grow 0
	if i < 0 {
		t.Fatal("no memory.grow")
	}
	bad := append([]byte{}, wasm...)
	bad[i], bad[i+1] = 0xfc, 0x13
	e := newTestEngine(t, sandbox.Config{}, options{})
	_, err = e.Compile(context.Background(), bad)
	if err == nil || !strings.Contains(err.Error(), "0xfc 0x13") {
		t.Fatalf("Compile = %v, want an error naming the instruction", err)
	}
}

// TestMemory64LeftAlone: a module with a 64-bit memory is not rewritten
// and so is never reported as out of memory; the limit still holds.
func TestMemory64LeftAlone(t *testing.T) {
	wasm, err := wt.Wat2Wasm(`(module (memory i64 1)
		(func (export "run") (if (i64.ne (memory.grow (i64.const 3200)) (i64.const -1)) (then return)) unreachable))`)
	if err != nil {
		t.Fatal(err)
	}
	if out, n, err := wasmbin.TrackGrowth(wasm); err != nil || n != 0 || string(out) != string(wasm) {
		t.Fatalf("TrackGrowth = %d, %v; want the module left alone", n, err)
	}
	e := newTestEngine(t, sandbox.Config{}, options{})
	ctx := context.Background()
	m, err := e.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	err = m.Run(ctx, sandbox.RunConfig{MemoryLimit: 64 << 20, Timeout: time.Minute})
	var ee *sandbox.ExitError
	if !errors.As(err, &ee) || ee.Trap == "" || errors.Is(err, sandbox.ErrMemoryLimit) {
		t.Fatalf("Run = %v, want a trap (the growth refused) without ErrMemoryLimit", err)
	}
}
