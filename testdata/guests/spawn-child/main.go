// Command spawn-child reports what it was given: its input, the level of
// its "test" capability, and whether it can find capabilities it was not
// passed.
package main

import (
	"fmt"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

func main() {
	in, _ := mandate.InputBytes()
	level := "none"
	if c, err := mandate.Lookup("test"); err == nil {
		if b, err := c.Call("level", nil); err == nil {
			v, _ := b.Bytes()
			level = string(v)
		} else {
			level = mandate.ErrnoOf(err).String()
		}
	}
	_, err := mandate.Lookup("spawner")
	mandate.SetResult([]byte(fmt.Sprintf("input=%s level=%s spawner=%s", in, level, mandate.ErrnoOf(err))))
}
