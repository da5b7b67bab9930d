// Command cli-loop fetches /search?i=N through its "web" capability
// forever (until killed): each fetch is an audited effect.
package main

import (
	"fmt"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	mnet "github.com/mandatevm/mandate/guest-sdk/net"
)

func main() {
	web, err := mandate.Lookup("web")
	if err != nil {
		panic(err)
	}
	for i := 0; ; i++ {
		if _, err := mnet.Fetch(web, abi.HTTPRequest{Method: "GET", URL: fmt.Sprintf("/search?i=%d", i)}); err != nil {
			panic(err)
		}
	}
}
