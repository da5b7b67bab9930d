// Command well-behaved echoes its input through the test capability: the
// task that runs after each hostile one, to show the kernel is healthy.
package main

import (
	mandate "github.com/mandatevm/mandate/guest-sdk"
)

func main() {
	in, err := mandate.InputBytes()
	if err != nil {
		panic(err)
	}
	c, err := mandate.Lookup("test")
	if err != nil {
		panic(err)
	}
	res, err := c.Call("echo", in)
	if err != nil {
		panic(err)
	}
	if err := mandate.SetResultBlob(res); err != nil {
		panic(err)
	}
}
