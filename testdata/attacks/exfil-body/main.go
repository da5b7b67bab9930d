// Command exfil-body tries to carry Alice's passport out in a request
// body: the unread blob as body_blob, spliced into a JSON body, then read
// and sent inline, as JSON, and as a new blob of its own making. Law 7:
// EFLOW, nothing sent; the vault, cleared for it, gets it by handle.
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
	vault := attack.Must(mandate.Lookup("vault"))
	mydata := attack.Must(mandate.Lookup("mydata"))
	pb, err := mydata.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`))
	attack.Rec("read_unread", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/echo", BodyBlob: pb.Handle()})
	attack.Rec("body_blob", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/echo", Body: []byte(`{"p":"` + abi.SplicePlaceholder(0) + `"}`), Splice: []abi.Handle{pb.Handle()}})
	attack.Rec("splice_body", err)
	// Passing it on unread to the one sink cleared for it works.
	_, err = fetch(vault, abi.HTTPRequest{Method: "POST", URL: "/vault/store", BodyBlob: pb.Handle()})
	attack.Rec("vault_body_blob", err)
	raw, err := pb.Bytes()
	attack.Rec("read", err)
	var r struct {
		Fields struct{ Passport string } `json:"fields"`
	}
	json.Unmarshal(raw, &r)
	p := r.Fields.Passport
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/echo", Body: []byte(p)})
	attack.Rec("body_inline", err)
	js, _ := json.Marshal(map[string]string{"note": "harmless", "x": p})
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/echo", Body: js})
	attack.Rec("body_json", err)
	nb, err := mandate.NewBlob([]byte(p))
	attack.Rec("new_blob", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/echo", BodyBlob: nb.Handle()})
	attack.Rec("body_new_blob", err)
	attack.Finish()
}

func fetch(c mandate.Cap, r abi.HTTPRequest) (mandate.Blob, error) {
	b, _ := abi.EncodeHTTPRequest(r)
	return c.Call("fetch", b)
}
