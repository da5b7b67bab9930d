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
	level, widen := "none", "none"
	if c, err := mandate.Lookup("test"); err == nil {
		// Asking for more than it was given: level 5 is the parent's.
		_, err := c.Derive(map[string]any{"level": 5})
		widen = mandate.ErrnoOf(err).String()
		if b, err := c.Call("level", nil); err == nil {
			v, _ := b.Bytes()
			level = string(v)
		} else {
			level = mandate.ErrnoOf(err).String()
		}
	}
	_, err := mandate.Lookup("spawner")
	mandate.SetResult([]byte(fmt.Sprintf("input=%s level=%s spawner=%s widen=%s", in, level, mandate.ErrnoOf(err), widen)))
}
