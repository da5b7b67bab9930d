package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/wasmasm"
)

// Guest is one of the guests a lifecycle task runs.
type Guest string

const (
	// GoReactor is testdata/guests/bench-lifecycle, entered at "run" after
	// _initialize (the Go runtime's start).
	GoReactor Guest = "go-reactor"
	// GoCommand is testdata/guests/bench-lifecycle-cmd, run from _start.
	GoCommand Guest = "go-command"
	// Tiny is TinyModule: the same four host calls, hand-assembled, with
	// no runtime to start.
	Tiny Guest = "tiny"
)

// Guests are the guests of a lifecycle, in the order the benchmarks and
// BENCHMARKS.md list them.
var Guests = []Guest{GoReactor, GoCommand, Tiny}

// guestDirs are the Go guests' directories under testdata/guests.
var guestDirs = map[Guest]string{GoReactor: "bench-lifecycle", GoCommand: "bench-lifecycle-cmd"}

// GuestsDir is the repository's testdata/guests, found from this source
// file's path (the benchmarks run from a source tree).
func GuestsDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "", errors.New("lifecycle: cannot locate testdata/guests (built with -trimpath?)")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "guests"), nil
}

// Module is the WebAssembly module of g: the Go guests built by
// guestbuild (cached by content), the tiny one assembled.
func Module(ctx context.Context, g Guest) ([]byte, error) {
	if g == Tiny {
		return TinyModule(), nil
	}
	name, ok := guestDirs[g]
	if !ok {
		return nil, fmt.Errorf("lifecycle: no guest %q", g)
	}
	root, err := GuestsDir()
	if err != nil {
		return nil, err
	}
	wasm, _, err := guestbuild.Build(ctx, filepath.Join(root, name), guestbuild.Options{Reactor: g == GoReactor})
	if err != nil {
		return nil, fmt.Errorf("lifecycle: building %s: %w", name, err)
	}
	return wasm, nil
}

// TinyModule is a reactor doing what bench-lifecycle's "run" does with no
// language runtime: cap_lookup("d"), task_input, cap_call(d, "declassify",
// {"blob":INPUT}) and task_result of what it returned; it traps at the
// first errno that is not zero. Its memory is one page:
//
//	0   the capability's handle     16  "d"
//	4   the input's handle          24  "declassify"
//	8   the result's handle         up to 120: {"blob":DIGITS, then "}"
func TinyModule() []byte {
	const (
		capAt, inAt, outAt = 0, 4, 8
		nameAt, opAt       = 16, 24
		digitsEnd          = 120 // the '}' is here; digits are written down from it
		prefix             = `{"blob":`
	)
	i32 := func(v int64) []byte { return wasmasm.Cat([]byte{0x41}, wasmasm.Sleb(v)) }
	load := func(off uint64) []byte { return wasmasm.Cat(i32(0), []byte{0x28, 0x02}, wasmasm.Uleb(off)) } // i32.load align=4
	check := []byte{0x04, 0x40, 0x00, 0x0b}                                                               // if (errno) unreachable
	const n, p = 0, 1                                                                                     // locals
	get := func(l byte) []byte { return []byte{0x20, l} }
	set := func(l byte) []byte { return []byte{0x21, l} }
	tee := func(l byte) []byte { return []byte{0x22, l} }
	code := wasmasm.Cat(
		i32(nameAt), i32(1), i32(capAt), []byte{0x10, 0}, check, // cap_lookup("d", &cap)
		i32(inAt), []byte{0x10, 1}, check, // task_input(&in)
		load(inAt), set(n), i32(digitsEnd), set(p),
		// do { p--; mem[p] = '0' + n%10; n /= 10 } while n != 0
		[]byte{0x03, 0x40},
		get(p), i32(1), []byte{0x6b}, tee(p),
		get(n), i32(10), []byte{0x70}, i32('0'), []byte{0x6a},
		[]byte{0x3a, 0x00, 0x00}, // i32.store8
		get(n), i32(10), []byte{0x6e}, tee(n),
		[]byte{0x0d, 0x00, 0x0b}, // br_if 0; end
		get(p), i32(int64(len(prefix))), []byte{0x6b}, set(p),
	)
	for i := 0; i < len(prefix); i++ {
		code = wasmasm.Cat(code, get(p), i32(int64(prefix[i])), []byte{0x3a, 0x00}, wasmasm.Uleb(uint64(i)))
	}
	code = wasmasm.Cat(code,
		load(capAt), i32(opAt), i32(int64(len("declassify"))), // cap_call(cap, "declassify",
		get(p), i32(digitsEnd+1), get(p), []byte{0x6b}, // args, len,
		i32(outAt), []byte{0x10, 2}, check, // &out)
		load(outAt), []byte{0x10, 3}, check, // task_result(out)
	)
	body := wasmasm.Cat([]byte{0x01, 0x02, 0x7f}, code, []byte{0x0b}) // two i32 locals
	fn := func(params int) []byte {
		b := []byte{0x60}
		b = append(b, wasmasm.Uleb(uint64(params))...)
		for range params {
			b = append(b, 0x7f)
		}
		return append(b, 0x01, 0x7f)
	}
	imp := func(name string, typ byte) []byte {
		return wasmasm.Cat(wasmasm.Name(abi.ModuleName), wasmasm.Name(name), []byte{0x00, typ})
	}
	data := func(at int64, s string) []byte {
		return wasmasm.Cat([]byte{0x00}, i32(at), []byte{0x0b}, wasmasm.Name(s))
	}
	return wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec(fn(3), fn(1), fn(6), []byte{0x60, 0x00, 0x00})),
		wasmasm.Section(2, wasmasm.Vec(
			imp(abi.CapLookupName, 0), imp(abi.TaskInputName, 1),
			imp(abi.CapCallName, 2), imp(abi.TaskResultName, 1))),
		wasmasm.Section(3, wasmasm.Vec([]byte{0x03})),       // func 4: () -> ()
		wasmasm.Section(5, wasmasm.Vec([]byte{0x00, 0x01})), // one page
		wasmasm.Section(7, wasmasm.Vec(
			wasmasm.Cat(wasmasm.Name("run"), []byte{0x00, 0x04}),
			wasmasm.Cat(wasmasm.Name("memory"), []byte{0x02, 0x00}))),
		wasmasm.Section(10, wasmasm.Vec(wasmasm.Cat(wasmasm.Uleb(uint64(len(body))), body))),
		wasmasm.Section(11, wasmasm.Vec(data(nameAt, "d"), data(opAt, "declassify"), data(digitsEnd, "}"))),
	)
}
