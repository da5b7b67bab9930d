// Command benefits is the my_benefits tool of the MCP desk: it takes no
// arguments and returns the benefits records its data capability reaches.
// The capability grants "the principal's own record", so called for Alice
// it returns Alice's and nobody else's: the tool never says whose.
//
// The result is the data store's answer, passed on unread: it carries the
// record's labels (pii:alice), and the session that is shown it rises to
// them.
package main

import (
	"fmt"
	"os"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

func main() {
	c, err := mandate.Lookup("benefits")
	if err != nil {
		fail(err)
	}
	res, err := c.Call("query", []byte(`{"where":{},"limit":10}`))
	if err != nil {
		fail(err)
	}
	if err := mandate.SetResultBlob(res); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "my_benefits:", err)
	os.Exit(1)
}
