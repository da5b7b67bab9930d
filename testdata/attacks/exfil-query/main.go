// Command exfil-query tries to carry Alice's passport out in a query
// string: spliced unread into a query parameter, then read and written
// into query values, parameter names and a fragment. Law 7: EFLOW, nothing
// sent.
package main

import (
	"encoding/json"
	"net/url"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

func main() {
	in := attack.ReadInput()
	web := attack.Must(mandate.Lookup("web"))
	mydata := attack.Must(mandate.Lookup("mydata"))
	pb, err := mydata.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`))
	attack.Rec("read_unread", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/search?q=" + abi.SplicePlaceholder(0), Splice: []abi.Handle{pb.Handle()}})
	attack.Rec("splice_query", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/search?" + abi.SplicePlaceholder(0) + "=1", Splice: []abi.Handle{pb.Handle()}})
	attack.Rec("splice_query_name", err)
	raw, err := pb.Bytes()
	attack.Rec("read", err)
	var r struct {
		Fields struct{ Passport string } `json:"fields"`
	}
	json.Unmarshal(raw, &r)
	p := url.QueryEscape(r.Fields.Passport)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/search?q=" + p})
	attack.Rec("query", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/search?" + p + "=1"})
	attack.Rec("query_name", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/search#" + p})
	attack.Rec("fragment", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: in.Granted + "/api/search?q=" + p})
	attack.Rec("absolute_query", err)
	attack.Finish()
}

func fetch(c mandate.Cap, r abi.HTTPRequest) (mandate.Blob, error) {
	b, _ := abi.EncodeHTTPRequest(r)
	return c.Call("fetch", b)
}
