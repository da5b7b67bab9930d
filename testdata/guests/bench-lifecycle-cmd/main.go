// Command bench-lifecycle-cmd is the Go command of the task lifecycle
// benchmark (internal/lifecycle): it declassifies the task's input through
// the capability "d" and makes the result the task's own, as
// bench-lifecycle's "run" does.
package main

import (
	"strconv"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

func main() {
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
