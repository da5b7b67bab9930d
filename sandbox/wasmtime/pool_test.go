//go:build wasmtime

package wasmtime

import (
	"context"
	"errors"
	"sync"
	"testing"

	wt "github.com/bytecodealliance/wasmtime-go/v39"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/sandboxtest"
)

// secretWAT is a reactor with 64 pages of memory and a data segment.
// "write" grows the memory by 16 pages and fills all of it with the
// secret "SECRET42", over the data segment too. "scan" grows the memory by
// 16 pages as well, then returns 1 if the secret is anywhere in its
// memory, grown pages included, 2 if the data segment is not as the module
// declares it, 3 if the memory did not start at 64 pages, and 0 otherwise.
// Both first call test.base, which records where the memory is.
// "selftest" is write then scan in one task: it must find the secret.
const secretWAT = `(module
  (import "test" "base" (func $base (param i32) (result i32)))
  (memory (export "memory") 64)
  (data (i32.const 1024) "mandate: the module's own data")
  (func $fill (param $v i64)
    (local $i i32) (local $end i32)
    (local.set $end (i32.mul (memory.size) (i32.const 65536)))
    (block $done (loop $l
      (br_if $done (i32.ge_u (local.get $i) (local.get $end)))
      (i64.store (local.get $i) (local.get $v))
      (local.set $i (i32.add (local.get $i) (i32.const 8)))
      (br $l))))
  (func $write (export "write") (result i32)
    (drop (call $base (i32.const 0)))
    (drop (memory.grow (i32.const 16)))
    (call $fill (i64.const 0x3234544552434553))
    (i32.const 0))
  (func $scan (export "scan") (result i32)
    (local $i i32) (local $end i32) (local $old i32)
    (drop (call $base (i32.const 0)))
    (local.set $old (memory.grow (i32.const 16)))
    (local.set $end (i32.mul (memory.size) (i32.const 65536)))
    (block $done (loop $l
      (br_if $done (i32.ge_u (local.get $i) (local.get $end)))
      (if (i64.eq (i64.load (local.get $i)) (i64.const 0x3234544552434553)) (then (return (i32.const 1))))
      (local.set $i (i32.add (local.get $i) (i32.const 8)))
      (br $l)))
    (if (i64.ne (i64.load (i32.const 1024)) (i64.const 0x3a657461646e616d)) (then (return (i32.const 2))))
    (if (i32.ne (local.get $old) (i32.const 64)) (then (return (i32.const 3))))
    (i32.const 0))
  (func (export "selftest") (result i32)
    (drop (call $write))
    (call $scan)))`

// TestPoolSlotReset: a task never sees what the previous task of the same
// module left in memory, though the pooling allocator hands it the same
// memory slot (the test checks that it does: the memory is at the same
// address). The first task fills its whole memory, grown and over the data
// segment, with a secret; the next one finds its memory at its initial
// size, the data segment as declared and the secret nowhere, grown pages
// included. The on-demand allocator is held to the same.
func TestPoolSlotReset(t *testing.T) {
	wasm, err := wt.Wat2Wasm(secretWAT)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opt  options
	}{
		{"pooling", options{}},
		{"ondemand", options{onDemand: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			e := newTestEngine(t, sandbox.Config{}, c.opt)
			if pooling := !c.opt.onDemand; e.Pooling() != pooling {
				if pooling && !poolFits(PoolInstances) {
					t.Skip("the pool's address space can not be reserved here (RLIMIT_AS?): the engine is on demand")
				}
				t.Fatalf("Pooling() = %t, want %t", e.Pooling(), pooling)
			}
			var base sandboxtest.MemoryBase
			if err := e.Host("test", []sandbox.HostFunc{base.Func("base")}); err != nil {
				t.Fatal(err)
			}
			m, err := e.Compile(ctx, wasm)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(ctx)
			run := func(entry string) (uintptr, error) {
				err := m.Run(ctx, sandbox.RunConfig{Entry: entry})
				return base.Last(), err
			}
			var exit *sandbox.ExitError
			if _, err := run("selftest"); !errors.As(err, &exit) || exit.Code != 1 {
				t.Fatalf("selftest = %v, want exit code 1 (the scan finds a secret that is there)", err)
			}
			for round := range 3 {
				wrote, err := run("write")
				if err != nil {
					t.Fatalf("round %d: write: %v", round, err)
				}
				scanned, err := run("scan")
				switch {
				case errors.As(err, &exit) && exit.Code == 1:
					t.Fatalf("round %d: the next task found the previous task's secret in its memory", round)
				case errors.As(err, &exit) && exit.Code == 2:
					t.Fatalf("round %d: the next task's data segment holds what the previous task wrote", round)
				case errors.As(err, &exit) && exit.Code == 3:
					t.Fatalf("round %d: the next task's memory did not start at its initial size", round)
				case err != nil:
					t.Fatalf("round %d: scan: %v", round, err)
				}
				if wrote == 0 || scanned == 0 {
					t.Fatalf("round %d: the host saw no memory (%#x, %#x)", round, wrote, scanned)
				}
				if e.Pooling() && wrote != scanned {
					t.Fatalf("round %d: the scanning task got another memory slot (%#x, the writer's %#x): the test does not test a reused slot", round, scanned, wrote)
				}
			}
		})
	}
}

// TestPoolFull: past its pool's instances, Run fails with ErrPoolFull
// rather than wait or abort, and a slot given back is taken again.
func TestPoolFull(t *testing.T) {
	ctx := context.Background()
	if !poolFits(2) {
		t.Skip("the pool's address space can not be reserved here")
	}
	e := newTestEngine(t, sandbox.Config{}, options{poolInstances: 2})
	if !e.Pooling() {
		t.Fatal("Pooling() = false with a pool of 2 that fits")
	}
	entered := make(chan struct{})
	release := make(chan struct{})
	if err := e.Host("test", []sandbox.HostFunc{{Name: "base", Params: sandbox.Values(1), Fn: func(_ context.Context, _ sandbox.Memory, stack []uint64) {
		if stack[0] == 1 {
			entered <- struct{}{}
			<-release
		}
		stack[0] = 0
	}}}); err != nil {
		t.Fatal(err)
	}
	wasm, err := wt.Wat2Wasm(`(module
  (import "test" "base" (func $base (param i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "block") (result i32) (call $base (i32.const 1)))
  (func (export "run") (result i32) (call $base (i32.const 0))))`)
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() { errs[i] = m.Run(ctx, sandbox.RunConfig{Entry: "block"}) })
		<-entered
	}
	err = m.Run(ctx, sandbox.RunConfig{Entry: "run"})
	close(release)
	wg.Wait()
	if !errors.Is(err, ErrPoolFull) {
		t.Fatalf("a third run at once = %v, want ErrPoolFull", err)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("blocked run %d: %v", i, err)
		}
	}
	for i := range 3 {
		if err := m.Run(ctx, sandbox.RunConfig{Entry: "run"}); err != nil {
			t.Fatalf("run %d once the slots are back: %v", i, err)
		}
	}
}

// TestPoolFallback: an engine whose pool can not be reserved runs on
// demand instead of aborting the process, as wasmtime would.
func TestPoolFallback(t *testing.T) {
	if poolFits(1 << 31) {
		t.Fatal("poolFits reports room for 2^31 slots of 4 GiB")
	}
	e := newTestEngine(t, sandbox.Config{}, options{poolInstances: 1 << 31})
	if e.Pooling() {
		t.Fatal("Pooling() = true with a pool that can not fit")
	}
	wasm, err := wt.Wat2Wasm(`(module (memory (export "memory") 1) (func (export "run")))`)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m, err := e.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	if err := m.Run(ctx, sandbox.RunConfig{}); err != nil {
		t.Fatal(err)
	}
}

// TestAllocatorEnv: AllocatorEnv chooses the allocator of New's engines and
// a value it does not know is refused.
func TestAllocatorEnv(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		env     string
		pooling bool
		ok      bool
	}{
		{"", true, true},
		{"pooling", true, true},
		{"ondemand", false, true},
		{"mmap", false, false},
	} {
		t.Run(c.env, func(t *testing.T) {
			t.Setenv(AllocatorEnv, c.env)
			e, err := New(ctx, sandbox.Config{})
			if !c.ok {
				if err == nil {
					e.Close(ctx)
					t.Fatalf("New with %s=%q succeeded", AllocatorEnv, c.env)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close(ctx)
			if c.pooling && !poolFits(PoolInstances) {
				c.pooling = false // the fallback
			}
			if got := e.Pooling(); got != c.pooling {
				t.Errorf("%s=%q: Pooling() = %t, want %t", AllocatorEnv, c.env, got, c.pooling)
			}
		})
	}
}

// TestConformanceOnDemand runs the suite every engine passes on the
// on-demand allocator (TestConformance runs it on the pool, the default).
func TestConformanceOnDemand(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	sandboxtest.Run(t, func(t testing.TB, cfg sandbox.Config) sandbox.Engine {
		return newTestEngine(t, cfg, options{onDemand: true})
	})
}
