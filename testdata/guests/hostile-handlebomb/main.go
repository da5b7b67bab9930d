// Command hostile-handlebomb fills its capability table with blobs until
// the kernel says ELIMIT, then drops one and shows the table works again.
package main

import (
	"fmt"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

func main() {
	var last mandate.Blob
	n := 0
	var err error
	for n < 100000 {
		var b mandate.Blob
		b, err = mandate.NewBlob([]byte("x"))
		if err != nil {
			break
		}
		last = b
		n++
	}
	last.Drop()
	y, again := mandate.NewBlob([]byte("y"))
	y.Drop() // room for the result blob
	mandate.SetResult([]byte(fmt.Sprintf("%d %v %v", n, mandate.ErrnoOf(err), mandate.ErrnoOf(again))))
}
