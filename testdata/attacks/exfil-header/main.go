// Command exfil-header tries to carry Alice's passport out in request
// headers: spliced unread into a header value, then read and written into
// a header value, a header name, a cookie and the reserved Authorization
// header. Law 7: EFLOW, nothing sent.
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

func main() {
	readInput()
	web := must(mandate.Lookup("web"))
	mydata := must(mandate.Lookup("mydata"))
	pb, err := mydata.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`))
	rec("read_unread", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/h", Header: map[string][]string{"X-Data": {abi.SplicePlaceholder(0)}}, Splice: []abi.Handle{pb.Handle()}})
	rec("splice_header", err)
	// Overriding the injected credential is refused whatever the label.
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/h", Header: map[string][]string{"Authorization": {"Bearer mine"}}})
	rec("set_authorization", err)
	raw, err := pb.Bytes()
	rec("read", err)
	var r struct {
		Fields struct{ Passport string } `json:"fields"`
	}
	json.Unmarshal(raw, &r)
	p := r.Fields.Passport
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/h", Header: map[string][]string{"X-Data": {p}}})
	rec("header_value", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/h", Header: map[string][]string{"X-" + p: {"1"}}})
	rec("header_name", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/h", Header: map[string][]string{"User-Agent": {p}}})
	rec("user_agent", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/h", Header: map[string][]string{"Cookie": {"p=" + p}}})
	rec("cookie", err)
	finish()
}

func fetch(c mandate.Cap, r abi.HTTPRequest) (mandate.Blob, error) {
	b, _ := abi.EncodeHTTPRequest(r)
	return c.Call("fetch", b)
}

// res collects each attempt's errno (keys) and details ("#" keys).
var res = map[string]string{}

func rec(k string, err error) { res[k] = mandate.ErrnoOf(err).String() }

func note(k, v string) { res["#"+k] = v }

func finish() {
	b, _ := json.Marshal(res)
	if err := mandate.SetResult(b); err != nil {
		panic(err)
	}
}

type input struct {
	Granted     string            `json:"granted"`
	GrantedHost string            `json:"granted_host"`
	GrantedPort string            `json:"granted_port"`
	Evil        string            `json:"evil"`
	EvilPort    string            `json:"evil_port"`
	Self        string            `json:"self"`
	Digests     map[string]string `json:"digests"`
	Mode        string            `json:"mode"`
}

func readInput() input {
	var in input
	b, err := mandate.InputBytes()
	if err != nil {
		panic(err)
	}
	if err := json.Unmarshal(b, &in); err != nil {
		panic(err)
	}
	return in
}

func must(c mandate.Cap, err error) mandate.Cap {
	if err != nil {
		panic(err)
	}
	return c
}
