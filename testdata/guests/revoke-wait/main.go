// Command revoke-wait uses its capability until the kernel says it was
// revoked (the host revokes it while the task runs), and reports the errno.
package main

import (
	"time"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

func main() {
	c, err := mandate.Lookup("test")
	if err != nil {
		panic(err)
	}
	for i := 0; i < 3000; i++ {
		if _, err := c.Call("noop", nil); err != nil {
			mandate.SetResult([]byte(mandate.ErrnoOf(err).String()))
			return
		}
		time.Sleep(time.Millisecond)
	}
	mandate.SetResult([]byte("never revoked"))
}
