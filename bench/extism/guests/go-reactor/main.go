// Command go-reactor is the Extism twin of testdata/guests/bench-lifecycle
// (a Go reactor; Extism calls _initialize before the first call): "run"
// passes its input to the host function "declassify", which returns a new
// block, and makes that block its output; "idle" returns at once (it only
// starts the Go runtime). It imports the Extism kernel's functions itself:
// the Go PDK (github.com/extism/go-pdk) is not in the module proxy this
// machine may use, and these four are all it would call here.
package main

// This guest is a reactor (guestbuild builds it with -buildmode=c-shared):
//
//mandate:reactor

//go:wasmimport extism:host/env input_offset
func inputOffset() uint64

//go:wasmimport extism:host/env length
func length(offset uint64) uint64

//go:wasmimport extism:host/env output_set
func outputSet(offset, n uint64)

//go:wasmimport extism:host/user declassify
func declassify(offset uint64) uint64

func main() {}

//go:wasmexport run
func run() int32 {
	out := declassify(inputOffset())
	outputSet(out, length(out))
	return 0
}

//go:wasmexport idle
func idle() int32 { return 0 }
