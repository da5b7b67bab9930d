// Command search is the web_search tool of the MCP desk: its arguments
// are {"q": QUERY}, and its result is the body of GET /search?q=QUERY on
// its net capability "web", a public search origin.
package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	mnet "github.com/mandatevm/mandate/guest-sdk/net"
)

func main() {
	in, err := mandate.InputBytes()
	if err != nil {
		fail(err)
	}
	var a struct {
		Q string `json:"q"`
	}
	if err := json.Unmarshal(in, &a); err != nil {
		fail(err)
	}
	web, err := mandate.Lookup("web")
	if err != nil {
		fail(err)
	}
	resp, err := mnet.Fetch(web, abi.HTTPRequest{Method: "GET", URL: "/search?q=" + url.QueryEscape(a.Q)})
	if err != nil {
		fail(err)
	}
	if resp.Status != 200 {
		fail(fmt.Errorf("the search answered %d", resp.Status))
	}
	mandate.SetResult(resp.Body)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "web_search:", err)
	os.Exit(1)
}
