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
// zero; a growth past the task's limit is refused as before.
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
