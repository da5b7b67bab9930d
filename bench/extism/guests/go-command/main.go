// Command go-command is the Extism twin of
// testdata/guests/bench-lifecycle-cmd (a Go command, called at _start): it
// passes its input to the host function "declassify" and makes the block
// that returns its output, as go-reactor's "run" does.
package main

//go:wasmimport extism:host/env input_offset
func inputOffset() uint64

//go:wasmimport extism:host/env length
func length(offset uint64) uint64

//go:wasmimport extism:host/env output_set
func outputSet(offset, n uint64)

//go:wasmimport extism:host/user declassify
func declassify(offset uint64) uint64

func main() {
	out := declassify(inputOffset())
	outputSet(out, length(out))
}
