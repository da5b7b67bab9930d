// Command bench-lifecycle is the Go reactor of the task lifecycle benchmark
// (internal/lifecycle): "run" declassifies the task's input through the
// capability "d" and makes the result the task's own; "idle" says "ready"
// on stdout, then waits until the task is stopped.
package main

import (
	"os"
	"strconv"
	"time"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

// This guest is a reactor:
//
//mandate:reactor

func main() {}

//go:wasmexport run
func run() {
	d, err := mandate.Lookup("d")
	if err != nil {
		panic(err)
	}
	in, err := mandate.Input()
	if err != nil {
		panic(err)
	}
	out, err := d.Call("declassify", []byte(`{"blob":`+strconv.FormatUint(uint64(in.Handle()), 10)+`}`))
	if err != nil {
		panic(err)
	}
	if err := mandate.SetResultBlob(out); err != nil {
		panic(err)
	}
}

//go:wasmexport idle
func idle() {
	os.Stdout.WriteString("ready\n")
	for {
		time.Sleep(time.Hour)
	}
}
