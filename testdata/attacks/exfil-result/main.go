// Command exfil-result launders through a child's result: a child (given
// Alice's data) reads her passport and returns it as its result to a
// parent that never read it. The result blob carries the child's label
// (law 6): the parent cannot splice it to a public sink or send it as a
// body (law 7), and reading it taints the parent.
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

func main() {
	in := attack.TryInput()
	if in.Mode == "child" {
		d := attack.Must(mandate.Lookup("mydata"))
		b, err := d.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`))
		if err != nil {
			panic(err)
		}
		rb, _ := b.Bytes()
		var r struct {
			Fields struct{ Passport string } `json:"fields"`
		}
		json.Unmarshal(rb, &r)
		mandate.SetResult([]byte(r.Fields.Passport))
		return
	}
	sp := attack.Must(mandate.Lookup("spawner"))
	web := attack.Must(mandate.Lookup("web"))
	mydata := attack.Must(mandate.Lookup("mydata"))
	cin, _ := mandate.NewBlob([]byte(`{"mode":"child"}`))
	c, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: cin.Handle(),
		Caps: []abi.SpawnCap{{Handle: mydata.Handle(), Name: "mydata"}}})
	attack.Rec("spawn", err)
	rb, err := c.Wait()
	attack.Rec("wait", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/echo", BodyBlob: rb.Handle()})
	attack.Rec("result_as_body", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/r?x=" + abi.SplicePlaceholder(0), Splice: []abi.Handle{rb.Handle()}})
	attack.Rec("result_spliced", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/before-reading-result"})
	attack.Rec("clean_before_read", err)
	p, err := rb.Bytes()
	attack.Rec("read_result", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/echo", Body: p})
	attack.Rec("result_inline", err)
	attack.Finish()
}

func fetch(c mandate.Cap, r abi.HTTPRequest) (mandate.Blob, error) {
	b, _ := abi.EncodeHTTPRequest(r)
	return c.Call("fetch", b)
}
