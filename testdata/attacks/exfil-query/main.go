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
)

func main() {
	in := readInput()
	web := must(mandate.Lookup("web"))
	mydata := must(mandate.Lookup("mydata"))
	pb, err := mydata.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`))
	rec("read_unread", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/search?q=" + abi.SplicePlaceholder(0), Splice: []abi.Handle{pb.Handle()}})
	rec("splice_query", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/search?" + abi.SplicePlaceholder(0) + "=1", Splice: []abi.Handle{pb.Handle()}})
	rec("splice_query_name", err)
	raw, err := pb.Bytes()
	rec("read", err)
	var r struct {
		Fields struct{ Passport string } `json:"fields"`
	}
	json.Unmarshal(raw, &r)
	p := url.QueryEscape(r.Fields.Passport)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/search?q=" + p})
	rec("query", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/search?" + p + "=1"})
	rec("query_name", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/search#" + p})
	rec("fragment", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: in.Granted + "/api/search?q=" + p})
	rec("absolute_query", err)
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
