// Command snapshot-init is a reactor that reads its input and looks up a
// capability in its package initialisation, then, from its entry, returns
// what it read: "input=<input> cap=<errno>". Started from a snapshot whose
// init had been given one task's input, every task would return that
// input; the engine must refuse such a module a snapshot.
//
//mandate:reactor
package main

import (
	mandate "github.com/mandatevm/mandate/guest-sdk"
)

var (
	input, inputErr = mandate.InputBytes()
	_, capErr       = mandate.Lookup("test")
)

func main() {}

//go:wasmexport run
func run() {
	out := "input=" + string(input)
	if inputErr != nil {
		out += " input_error=" + inputErr.Error()
	}
	out += " cap=" + mandate.ErrnoOf(capErr).String()
	mandate.SetResult([]byte(out))
}
