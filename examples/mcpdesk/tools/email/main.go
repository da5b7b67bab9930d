// Command email is the send_email tool of the MCP desk: its arguments are
// {"to", "subject", "text"}, posted as JSON to /send on its net capability
// "mail". The tool sends whatever it is asked to; the capability decides:
// its `when` constraint binds request.body.to to the principal's own
// address, and the mail API's key is attached by the kernel, never seen
// here.
package main

import (
	"encoding/json"
	"fmt"
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
		To      string `json:"to"`
		Subject string `json:"subject"`
		Text    string `json:"text"`
	}
	if err := json.Unmarshal(in, &a); err != nil {
		fail(err)
	}
	body, _ := json.Marshal(a)
	mail, err := mandate.Lookup("mail")
	if err != nil {
		fail(err)
	}
	resp, err := mnet.Fetch(mail, abi.HTTPRequest{Method: "POST", URL: "/send",
		Header: map[string][]string{"Content-Type": {"application/json"}}, Body: body})
	if err != nil {
		fail(err)
	}
	if resp.Status/100 != 2 {
		fail(fmt.Errorf("the mail API answered %d", resp.Status))
	}
	mandate.SetResult(resp.Body)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "send_email:", err)
	os.Exit(1)
}
