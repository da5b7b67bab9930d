// Command blob-hoard makes the kernel hold as many bytes as it can: it
// creates 1 MiB blobs and never drops them (each only costs the guest a
// handle, while the kernel keeps the bytes). The task's MaxBlobBytes
// bounds the bytes of blobs it holds (law 10): ELIMIT, and room again
// after a drop.
package main

import (
	"strconv"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

func main() {
	attack.ReadInput()
	chunk := make([]byte, 1<<20)
	var held []mandate.Blob
	var stop error
	for i := 0; i < 1000; i++ {
		b, err := mandate.NewBlob(chunk)
		if err != nil {
			stop = err
			break
		}
		held = append(held, b)
	}
	attack.Rec("stopped_by", stop)
	attack.Note("held_mib", strconv.Itoa(len(held)))
	// Results of calls count too: echo a big argument back.
	test := attack.Must(mandate.Lookup("test"))
	_, err := test.Call("echo", make([]byte, 512<<10))
	attack.Rec("call_result_over", err)
	if len(held) > 0 {
		held[0].Drop()
	}
	_, err = mandate.NewBlob(chunk)
	attack.Rec("after_drop", err)
	attack.Finish()
}
