// Command exfil-header tries to carry Alice's passport out in request
// headers: spliced unread into a header value, then read and written into
// a header value, a header name, a cookie and the reserved Authorization
// header. Law 7: EFLOW, nothing sent.
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

func main() {
	attack.ReadInput()
	web := attack.Must(mandate.Lookup("web"))
	mydata := attack.Must(mandate.Lookup("mydata"))
	pb, err := mydata.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`))
	attack.Rec("read_unread", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/h", Header: map[string][]string{"X-Data": {abi.SplicePlaceholder(0)}}, Splice: []abi.Handle{pb.Handle()}})
	attack.Rec("splice_header", err)
	// Overriding the injected credential is refused whatever the label.
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/h", Header: map[string][]string{"Authorization": {"Bearer mine"}}})
	attack.Rec("set_authorization", err)
	raw, err := pb.Bytes()
	attack.Rec("read", err)
	var r struct {
		Fields struct{ Passport string } `json:"fields"`
	}
	json.Unmarshal(raw, &r)
	p := r.Fields.Passport
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/h", Header: map[string][]string{"X-Data": {p}}})
	attack.Rec("header_value", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/h", Header: map[string][]string{"X-" + p: {"1"}}})
	attack.Rec("header_name", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/h", Header: map[string][]string{"User-Agent": {p}}})
	attack.Rec("user_agent", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/h", Header: map[string][]string{"Cookie": {"p=" + p}}})
	attack.Rec("cookie", err)
	attack.Finish()
}

func fetch(c mandate.Cap, r abi.HTTPRequest) (mandate.Blob, error) {
	b, _ := abi.EncodeHTTPRequest(r)
	return c.Call("fetch", b)
}
