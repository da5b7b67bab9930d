package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/wasmasm"
)

// GuestNames are the guests of testdata/guests the suite runs, without the
// "engine-" prefix of their directories.
var GuestNames = []string{
	"hello", "exit", "ambient", "reactor", "spin", "sleep",
	"membomb", "flood", "compute", "badimport", "initcall",
}

var (
	guestsMu sync.Mutex
	guests   = map[string][]byte{}
)

// BuildGuests builds every guest in GuestNames, in parallel, and keeps them
// for Guest. Main calls it. guestbuild caches the modules by
// content in the user cache dir (or $MANDATE_CACHE_DIR), so reruns are fast.
func BuildGuests() error {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return errors.New("sandboxtest: cannot locate testdata/guests")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..", "testdata", "guests")
	var (
		wg   sync.WaitGroup
		errs = make([]error, len(GuestNames))
	)
	for i, name := range GuestNames {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wasm, _, err := guestbuild.Build(context.Background(), filepath.Join(root, "engine-"+name), guestbuild.Options{})
			if err != nil {
				errs[i] = fmt.Errorf("building guest %s: %w", name, err)
				return
			}
			guestsMu.Lock()
			guests[name] = wasm
			guestsMu.Unlock()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Main is an engine package's whole TestMain: it builds the guests, then
// runs the tests, and exits with their status (1 if a guest did not build).
func Main(m *testing.M) {
	if err := BuildGuests(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// Guest returns the module BuildGuests built for name (without the
// "engine-" prefix). It panics when the guest was not built: a test that
// forgot BuildGuests fails at once rather than with a confusing error.
func Guest(name string) []byte {
	guestsMu.Lock()
	defer guestsMu.Unlock()
	wasm, ok := guests[name]
	if !ok {
		panic("sandboxtest: guest " + name + " not built (call BuildGuests in TestMain)")
	}
	return wasm
}

// CacheDir is a compilation cache directory named for engine that the
// tests of that engine share across runs, next to guestbuild's cache, so
// each guest is compiled once per machine rather than once per test.
func CacheDir(engine string) string {
	return filepath.Join(filepath.Dir(guestbuild.DefaultCacheDir()), engine+"-test")
}

// Hand-assembled modules: too small to need a Go guest, and they do what a
// Go guest can not (a Go program never recurses on the wasm stack, and
// never grows a table).

// reactorModule is a module with one memory page, the given tables section
// payload (nil for none), and one exported function "run" of type
// (func (result i32)) with body code (without locals and end).
func reactorModule(table []byte, code []byte) []byte {
	secs := [][]byte{
		wasmasm.Section(1, wasmasm.Vec([]byte{0x60, 0x00, 0x01, 0x7f})), // type 0: () -> i32
		wasmasm.Section(3, wasmasm.Vec([]byte{0x00})),                   // func 0: type 0
	}
	if table != nil {
		secs = append(secs, wasmasm.Section(4, table))
	}
	body := append([]byte{0x00}, code...) // no locals
	body = append(body, 0x0b)
	secs = append(secs,
		wasmasm.Section(5, []byte{0x01, 0x00, 0x01}),                                         // memory 0: min 1 page
		wasmasm.Section(7, wasmasm.Vec(append(wasmasm.Name("run"), 0x00, 0x00))),             // export "run" = func 0
		wasmasm.Section(10, wasmasm.Vec(wasmasm.Cat(wasmasm.Uleb(uint64(len(body))), body))), // code
	)
	return wasmasm.Module(secs...)
}

// RecursionModule is a reactor whose entry "run" calls itself forever: it
// overflows the wasm stack, which must be a trap of that task alone.
func RecursionModule() []byte {
	return reactorModule(nil, []byte{0x10, 0x00}) // call 0
}

// TableGrowModule is a reactor with one empty funcref table whose entry
// "run" grows it by n elements and returns table.grow's result plus one:
// 0 (Run returns nil) when the growth was refused, and 1 (an *ExitError
// with Code 1) when the table grew from 0 to n elements.
func TableGrowModule(n int32) []byte {
	code := []byte{0xd0, 0x70, 0x41} // ref.null func; i32.const n
	code = append(code, wasmasm.Sleb(int64(n))...)
	code = append(code,
		0xfc, 0x0f, 0x00, // table.grow 0
		0x41, 0x01, // i32.const 1
		0x6a, // i32.add
	)
	return reactorModule(wasmasm.Vec([]byte{0x70, 0x00, 0x00}), code) // funcref, min 0, no max
}

// GrowthGuest describes a command GrowthModule assembles: with Pages pages
// of memory (at most Max when Max is not zero), its _start grows the memory
// by Grow pages (when not zero, ignoring the result), writes Stderr to
// stderr (when not empty), then traps when Trap is set, or else calls
// proc_exit(Exit).
type GrowthGuest struct {
	Pages, Max, Grow uint32
	Stderr           string
	Trap             bool
	Exit             uint32
}

// GrowthModule assembles g: a guest refused one huge growth far below its
// memory limit, or one that only says "out of memory", which a Go guest
// can not be made to do.
func GrowthModule(g GrowthGuest) []byte {
	wasi := func(name string, typ byte) []byte {
		return wasmasm.Cat(wasmasm.Name("wasi_snapshot_preview1"), wasmasm.Name(name), []byte{0x00, typ})
	}
	var code []byte
	if g.Grow != 0 {
		code = append(code, 0x41)
		code = append(code, wasmasm.Sleb(int64(int32(g.Grow)))...)
		code = append(code, 0x40, 0x00, 0x1a) // memory.grow 0; drop
	}
	if g.Stderr != "" {
		// fd_write(2, iovs=0, 1, nwritten=8); drop
		code = append(code, 0x41, 0x02, 0x41, 0x00, 0x41, 0x01, 0x41, 0x08, 0x10, 0x00, 0x1a)
	}
	if g.Trap {
		code = append(code, 0x00) // unreachable
	} else {
		code = append(code, 0x41)
		code = append(code, wasmasm.Sleb(int64(int32(g.Exit)))...)
		code = append(code, 0x10, 0x01) // call proc_exit
	}
	body := wasmasm.Cat([]byte{0x00}, code, []byte{0x0b})
	mem := wasmasm.Cat([]byte{0x00}, wasmasm.Uleb(uint64(g.Pages)))
	if g.Max != 0 {
		mem = wasmasm.Cat([]byte{0x01}, wasmasm.Uleb(uint64(g.Pages)), wasmasm.Uleb(uint64(g.Max)))
	}
	// The iovec at 0 points at the message at 16.
	n := len(g.Stderr)
	data := wasmasm.Cat([]byte{16, 0, 0, 0, byte(n), byte(n >> 8), 0, 0}, make([]byte, 8), []byte(g.Stderr))
	return wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec(
			[]byte{0x60, 0x04, 0x7f, 0x7f, 0x7f, 0x7f, 0x01, 0x7f}, // 0: fd_write
			[]byte{0x60, 0x01, 0x7f, 0x00},                         // 1: proc_exit
			[]byte{0x60, 0x00, 0x00},                               // 2: _start
		)),
		wasmasm.Section(2, wasmasm.Vec(wasi("fd_write", 0), wasi("proc_exit", 1))),
		wasmasm.Section(3, wasmasm.Vec([]byte{0x02})),
		wasmasm.Section(5, wasmasm.Vec(mem)),
		wasmasm.Section(7, wasmasm.Vec(
			wasmasm.Cat(wasmasm.Name("_start"), []byte{0x00, 0x02}),
			wasmasm.Cat(wasmasm.Name("memory"), []byte{0x02, 0x00}))),
		wasmasm.Section(10, wasmasm.Vec(wasmasm.Cat(wasmasm.Uleb(uint64(len(body))), body))),
		wasmasm.Section(11, wasmasm.Vec(wasmasm.Cat([]byte{0x00, 0x41, 0x00, 0x0b}, wasmasm.Uleb(uint64(len(data))), data))),
	)
}
