// Command control is the well-behaved guest the attack suite runs after
// every attack, on the same kernel: it fetches /api/control through "web",
// reads Alice's plan through "mydata" and returns "ok <plan>".
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	mnet "github.com/mandatevm/mandate/guest-sdk/net"
)

func main() {
	web, err := mandate.Lookup("web")
	if err != nil {
		panic(err)
	}
	resp, err := mnet.Fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/control"})
	if err != nil || resp.Status != 200 {
		panic(err)
	}
	d, err := mandate.Lookup("mydata")
	if err != nil {
		panic(err)
	}
	b, err := d.Call("read", []byte(`{"owner":"alice","fields":["plan"]}`))
	if err != nil {
		panic(err)
	}
	raw, err := b.Bytes()
	if err != nil {
		panic(err)
	}
	var rec struct {
		Fields struct{ Plan string } `json:"fields"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		panic(err)
	}
	mandate.SetResult([]byte("ok " + rec.Fields.Plan))
}
