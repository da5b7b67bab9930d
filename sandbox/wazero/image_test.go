package wazero

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/mandatevm/mandate/internal/wasmasm"
	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/sandboxtest"
)

// imageModule is a reactor whose _initialize writes memory (over its data
// segment's page and into a page it grows), and whose "run" returns 0
// only when it sees exactly the memory init left (the data, init's
// writes, zeros elsewhere, two pages), then writes over all of it and
// grows the memory again: a task that saw another task's writes, or
// memory past the image that is not zero, returns the check's code.
func imageModule() []byte {
	i32 := func(v int64) []byte { return wasmasm.Cat([]byte{0x41}, wasmasm.Sleb(v)) }
	store := func(addr, v int64) []byte { return wasmasm.Cat(i32(addr), i32(v), []byte{0x36, 0x02, 0x00}) }
	check := func(addr, want, code int64) []byte {
		return wasmasm.Cat(i32(addr), []byte{0x28, 0x02, 0x00}, i32(want), []byte{0x47, 0x04, 0x40}, i32(code), []byte{0x0f, 0x0b})
	}
	grow := func(code int64) []byte { // memory.grow 1; -1: return code
		return wasmasm.Cat(i32(1), []byte{0x40, 0x00}, i32(-1), []byte{0x46, 0x04, 0x40}, i32(code), []byte{0x0f, 0x0b})
	}
	init := wasmasm.Cat(store(100, 0x5eed), i32(1), []byte{0x40, 0x00, 0x1a}, store(1<<16+8, 0x77))
	run := wasmasm.Cat(
		check(16, 0x64656573, 2), // "seed", the data segment
		check(100, 0x5eed, 3),
		check(1<<16+8, 0x77, 4),
		check(1<<16+200, 0, 5),
		check(40000, 0, 6),
		[]byte{0x3f, 0x00}, i32(2), []byte{0x47, 0x04, 0x40}, i32(7), []byte{0x0f, 0x0b}, // memory.size == 2
		store(16, 0xbad), store(100, 0xbad), store(1<<16+8, 0xbad), store(1<<16+200, 0xbad), store(40000, 0xbad),
		grow(8),
		check(2<<16+4, 0, 9),
		store(2<<16+4, 0xbad),
		i32(0),
	)
	body := func(b []byte) []byte {
		bd := wasmasm.Cat([]byte{0x00}, b, []byte{0x0b})
		return wasmasm.Cat(wasmasm.Uleb(uint64(len(bd))), bd)
	}
	return wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec([]byte{0x60, 0x00, 0x00}, []byte{0x60, 0x00, 0x01, 0x7f})),
		wasmasm.Section(3, wasmasm.Vec([]byte{0x00}, []byte{0x01})),
		wasmasm.Section(5, []byte{0x01, 0x01, 0x01, 0x08}), // 1 page, at most 8
		wasmasm.Section(7, wasmasm.Vec(
			wasmasm.Cat(wasmasm.Name("memory"), []byte{0x02, 0x00}),
			wasmasm.Cat(wasmasm.Name("_initialize"), []byte{0x00, 0x00}),
			wasmasm.Cat(wasmasm.Name("run"), []byte{0x00, 0x01}),
		)),
		wasmasm.Section(10, wasmasm.Vec(body(init), body(run))),
		wasmasm.Section(11, wasmasm.Vec(wasmasm.Cat([]byte{0x00, 0x41, 0x10, 0x0b}, wasmasm.Name("seed")))),
	)
}

// TestSnapshotImage: tasks that start from a snapshot's image (mapped copy
// on write, or copied) see exactly the memory init left, never another
// task's writes, one after another or at once; memory past the image is
// zero; a growth past the task's limit is refused as before. A mapped
// memory is reused by the next task (reset to the image): every task
// writes over the image and past it, and checks what it starts with.
func TestSnapshotImage(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []struct {
		name   string
		image  imageMode
		mapped bool
	}{{"mapped", imageMap, runtime.GOOS == "linux"}, {"copied", imageCopy, false}, {"segments", imageSegments, false}} {
		t.Run(mode.name, func(t *testing.T) {
			e, err := newEngine(ctx, sandbox.Config{CacheDir: t.TempDir()}, options{image: mode.image})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close(ctx)
			m, err := e.Compile(ctx, imageModule())
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(ctx)
			run := func(limit uint64) error {
				return m.Run(ctx, sandbox.RunConfig{Entry: "run", MemoryLimit: limit})
			}
			if err := run(64 << 20); err != nil {
				t.Fatalf("the first task (init): %v", err)
			}
			sandboxtest.Settled(t, m)
			f := m.(*Module).c.start.Load()
			if !f.snapshot {
				_, why := m.(*Module).Snapshot()
				t.Fatalf("no snapshot: %s", why)
			}
			if got := f.image != nil && f.image.mapped(); got != mode.mapped {
				t.Fatalf("image mapped: %v, want %v", got, mode.mapped)
			}
			if (f.image != nil) != (mode.image != imageSegments) {
				t.Fatalf("image %v in mode %s", f.image != nil, mode.name)
			}
			for i := range 3 {
				if err := run(64 << 20); err != nil {
					t.Fatalf("task %d: %v", i, err)
				}
			}
			// Each task after the first mapped one ran in the memory the
			// one before it left, reset (image_linux.go, recycle): the
			// checks above are what shows the reset complete.
			var reused uint64
			if f.image != nil {
				reused = f.image.reuses.Load()
			}
			if got := reused; mode.mapped && got < 2 || !mode.mapped && got != 0 {
				t.Fatalf("%d memories reused, mapped %v", got, mode.mapped)
			}
			if err := run(0); err != nil { // no limit: the whole address space
				t.Fatalf("a task without a limit: %v", err)
			}
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for i := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := run(64 << 20); err != nil {
						errs <- fmt.Errorf("concurrent task %d: %w", i, err)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			// Two pages allowed: run's growth is refused (code 8).
			var ee *sandbox.ExitError
			if err := run(2 << 16); !errors.As(err, &ee) || ee.Code != 8 || !errors.Is(err, sandbox.ErrMemoryLimit) {
				t.Fatalf("a growth past the limit: %v", err)
			}
			// Less than the image: refused before it starts.
			if err := run(1 << 16); !errors.Is(err, sandbox.ErrMemoryLimit) {
				t.Fatalf("a limit below the image: %v", err)
			}
			if err := run(64 << 20); err != nil {
				t.Fatalf("after the refusals: %v", err)
			}
		})
	}
}

// secretModule is a reactor of two pages, whose data segment holds a
// phrase and whose _initialize grows it to three. "write" grows it by four
// pages and fills all of it, the image and the data segment included,
// with the secret "SECRET42"; "scan" grows it by four pages too and
// returns 1 if the secret is anywhere in it, 2 if the data segment is not
// as the module declares it, 3 if the memory did not start at three pages,
// and 0 otherwise. Both first call test.base, which records where the
// memory is. "selftest" is write then scan in one task: it must find the
// secret. With init unset, _initialize is not exported: the module gets
// no snapshot, and its memory starts at its two pages.
func secretModule(init bool) []byte {
	const secret = 0x3234544552434553 // "SECRET42"
	const phrase = 0x3a657461646e616d // "mandate:"
	startPages, initName := int64(3), "_initialize"
	if !init {
		startPages, initName = 2, "not_initialize"
	}
	i32 := func(v int64) []byte { return wasmasm.Cat([]byte{0x41}, wasmasm.Sleb(v)) }
	i64 := func(v int64) []byte { return wasmasm.Cat([]byte{0x42}, wasmasm.Sleb(v)) }
	ret := func(code int64) []byte { return wasmasm.Cat([]byte{0x04, 0x40}, i32(code), []byte{0x0f, 0x0b}) } // if: return code
	// Locals 0 $i and 1 $end (and 2 $old): every byte of memory, 8 at a time.
	each := func(body []byte) []byte {
		return wasmasm.Cat([]byte{0x3f, 0x00}, i32(16), []byte{0x74, 0x21, 0x01}, // $end = memory.size << 16
			[]byte{0x02, 0x40, 0x03, 0x40},                   // block; loop
			[]byte{0x20, 0x00, 0x20, 0x01, 0x4f, 0x0d, 0x01}, // br_if 1 ($i >= $end)
			body,
			[]byte{0x20, 0x00}, i32(8), []byte{0x6a, 0x21, 0x00}, // $i += 8
			[]byte{0x0c, 0x00, 0x0b, 0x0b}) // br 0; end; end
	}
	base := wasmasm.Cat(i32(0), []byte{0x10, 0x00, 0x1a}) // drop (call $base 0)
	write := wasmasm.Cat(base, i32(4), []byte{0x40, 0x00, 0x1a},
		each(wasmasm.Cat([]byte{0x20, 0x00}, i64(secret), []byte{0x37, 0x03, 0x00})), // i64.store $i secret
		i32(0))
	scan := wasmasm.Cat(base, i32(4), []byte{0x40, 0x00, 0x21, 0x02}, // $old = memory.grow 4
		each(wasmasm.Cat([]byte{0x20, 0x00, 0x29, 0x03, 0x00}, i64(secret), []byte{0x51}, ret(1))),
		i32(1024), []byte{0x29, 0x03, 0x00}, i64(phrase), []byte{0x52}, ret(2),
		[]byte{0x20, 0x02}, i32(startPages), []byte{0x47}, ret(3),
		i32(0))
	body := func(locals, code []byte) []byte {
		b := wasmasm.Cat(locals, code, []byte{0x0b})
		return wasmasm.Cat(wasmasm.Uleb(uint64(len(b))), b)
	}
	three := []byte{0x01, 0x03, 0x7f}
	return wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec([]byte{0x60, 0x01, 0x7f, 0x01, 0x7f}, []byte{0x60, 0x00, 0x00}, []byte{0x60, 0x00, 0x01, 0x7f})),
		wasmasm.Section(2, wasmasm.Vec(wasmasm.Cat(wasmasm.Name("test"), wasmasm.Name("base"), []byte{0x00, 0x00}))),
		wasmasm.Section(3, wasmasm.Vec([]byte{0x01}, []byte{0x02}, []byte{0x02}, []byte{0x02})),
		wasmasm.Section(5, []byte{0x01, 0x00, 0x02}), // 2 pages
		wasmasm.Section(7, wasmasm.Vec(
			wasmasm.Cat(wasmasm.Name("memory"), []byte{0x02, 0x00}),
			wasmasm.Cat(wasmasm.Name(initName), []byte{0x00, 0x01}),
			wasmasm.Cat(wasmasm.Name("write"), []byte{0x00, 0x02}),
			wasmasm.Cat(wasmasm.Name("scan"), []byte{0x00, 0x03}),
			wasmasm.Cat(wasmasm.Name("selftest"), []byte{0x00, 0x04}),
		)),
		wasmasm.Section(10, wasmasm.Vec(
			body([]byte{0x00}, wasmasm.Cat(i32(1), []byte{0x40, 0x00, 0x1a})), // _initialize: grow 1
			body(three, write),
			body(three, scan),
			body([]byte{0x00}, []byte{0x10, 0x02, 0x1a, 0x10, 0x03}), // selftest: drop (write); scan
		)),
		wasmasm.Section(11, wasmasm.Vec(wasmasm.Cat([]byte{0x00}, i32(1024), []byte{0x0b}, wasmasm.Name("mandate: the module's own data")))),
	)
}

// TestImageReuseReset: a task that runs in the memory the previous task of
// the same module left (the same address, so the same mapping, reused)
// finds nothing of that task's secret, written over every byte of the
// image and of pages it grew, and finds the image as it was: with the
// grown pages kept resident and cleared, and with all but the first of
// them dropped (keepGrown of one wasm page). The image is a snapshot's,
// or the data segments of a module that gets no snapshot (plain).
func TestImageReuseReset(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("memories are mapped on Linux only")
	}
	for _, snapshot := range []bool{true, false} {
		for _, keep := range []uint64{keepGrown, 1 << 16} {
			name := "snapshot"
			if !snapshot {
				name = "plain"
			}
			t.Run(fmt.Sprintf("%s/keep=%d", name, keep), func(t *testing.T) {
				defer func(k uint64) { keepGrown = k }(keepGrown)
				keepGrown = keep
				testImageReuseReset(t, snapshot)
			})
		}
	}
}

func testImageReuseReset(t *testing.T, snapshot bool) {
	ctx := context.Background()
	e, err := newEngine(ctx, sandbox.Config{CacheDir: t.TempDir()}, options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	var base sandboxtest.MemoryBase
	if err := e.Host("test", []sandbox.HostFunc{base.Func("base")}); err != nil {
		t.Fatal(err)
	}
	m, err := e.Compile(ctx, secretModule(snapshot))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	run := func(entry string) (uintptr, error) {
		err := m.Run(ctx, sandbox.RunConfig{Entry: entry, MemoryLimit: 64 << 20})
		return base.Last(), err
	}
	var exit *sandbox.ExitError
	if _, err := run("selftest"); !errors.As(err, &exit) || exit.Code != 1 {
		t.Fatalf("selftest = %v, want exit code 1 (the scan finds a secret that is there)", err)
	}
	sandboxtest.Settled(t, m)
	if used, why := m.(*Module).Snapshot(); used != snapshot {
		t.Fatalf("snapshot used: %v (%s), want %v", used, why, snapshot)
	}
	if f := m.(*Module).c.start.Load(); f.image == nil || !f.image.mapped() {
		t.Fatal("the module's tasks do not start from a mapped image")
	}
	reused := 0
	for round := range 4 {
		wrote, err := run("write")
		if err != nil {
			t.Fatalf("round %d: write: %v", round, err)
		}
		scanned, err := run("scan")
		if err != nil {
			t.Fatalf("round %d: scan: %v (1: the previous task's secret is in the memory, 2: the data segment changed, 3: the memory's size)", round, err)
		}
		if wrote == scanned {
			reused++
		}
	}
	if reused == 0 {
		t.Fatal("no task ran in the memory of the task before it: the test shows nothing")
	}
}

// TestPlainImage: a module without a snapshot starts from its data
// segments as an image, in this process and in the next one (from the
// module's prepared record), and a module declaring more initial memory
// than maxPlainImage starts from its segments as wazero applies them.
func TestPlainImage(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("memories are mapped on Linux only")
	}
	ctx := context.Background()
	cache := t.TempDir()
	fromRecord := hits(t)
	for _, proc := range []string{"first", "next"} {
		e, err := newEngine(ctx, sandbox.Config{CacheDir: cache}, options{})
		if err != nil {
			t.Fatal(err)
		}
		var base sandboxtest.MemoryBase
		if err := e.Host("test", []sandbox.HostFunc{base.Func("base")}); err != nil {
			t.Fatal(err)
		}
		m, err := e.Compile(ctx, secretModule(false))
		if err != nil {
			t.Fatal(err)
		}
		if f := m.(*Module).c.start.Load(); f.image == nil || !f.image.mapped() {
			t.Fatalf("%s process: the module's tasks do not start from a mapped image", proc)
		}
		var exit *sandbox.ExitError
		if err := m.Run(ctx, sandbox.RunConfig{Entry: "selftest"}); !errors.As(err, &exit) || exit.Code != 1 {
			t.Fatalf("%s process: selftest = %v, want exit code 1", proc, err)
		}
		if err := m.Run(ctx, sandbox.RunConfig{Entry: "scan"}); err != nil {
			t.Fatalf("%s process: scan after selftest: %v", proc, err)
		}
		m.Close(ctx)
		e.Close(ctx)
	}
	if got := fromRecord(); len(got) != 1 {
		t.Fatalf("compiled from the prepared record %d times, want once (the next process)", len(got))
	}

	e, err := newEngine(ctx, sandbox.Config{CacheDir: cache}, options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	m, err := e.Compile(ctx, bigMemoryModule(maxPlainImage>>16+1))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	if f := m.(*Module).c.start.Load(); f.image != nil {
		t.Fatal("a module declaring more than maxPlainImage has an image")
	}
	if err := m.Run(ctx, sandbox.RunConfig{Entry: "run", MemoryLimit: 2 * maxPlainImage}); err != nil {
		t.Fatalf("the module past maxPlainImage: %v", err)
	}
}

// bigMemoryModule is a reactor of pages pages whose "run" returns 0 when
// its data segment, at the last page, is there.
func bigMemoryModule(pages uint64) []byte {
	i32 := func(v int64) []byte { return wasmasm.Cat([]byte{0x41}, wasmasm.Sleb(v)) }
	at := int64(pages-1) << 16
	run := wasmasm.Cat(i32(at), []byte{0x28, 0x02, 0x00}, i32(0x61746164), []byte{0x47}) // i32.load != "data"
	bd := wasmasm.Cat([]byte{0x00}, run, []byte{0x0b})
	return wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec([]byte{0x60, 0x00, 0x01, 0x7f})),
		wasmasm.Section(3, wasmasm.Vec([]byte{0x00})),
		wasmasm.Section(5, wasmasm.Cat([]byte{0x01, 0x00}, wasmasm.Uleb(pages))),
		wasmasm.Section(7, wasmasm.Vec(wasmasm.Cat(wasmasm.Name("run"), []byte{0x00, 0x00}))),
		wasmasm.Section(10, wasmasm.Vec(wasmasm.Cat(wasmasm.Uleb(uint64(len(bd))), bd))),
		wasmasm.Section(11, wasmasm.Vec(wasmasm.Cat([]byte{0x00}, i32(at), []byte{0x0b}, wasmasm.Name("data")))),
	)
}
