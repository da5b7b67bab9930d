// Command exfil-body tries to carry Alice's passport out in a request
// body: the unread blob as body_blob, spliced into a JSON body, then read
// and sent inline, as JSON, and as a new blob of its own making. Law 7:
// EFLOW, nothing sent; the vault, cleared for it, gets it by handle.
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

func main() {
	readInput()
	web := must(mandate.Lookup("web"))
	vault := must(mandate.Lookup("vault"))
	mydata := must(mandate.Lookup("mydata"))
	pb, err := mydata.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`))
	rec("read_unread", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/echo", BodyBlob: pb.Handle()})
	rec("body_blob", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/echo", Body: []byte(`{"p":"` + abi.SplicePlaceholder(0) + `"}`), Splice: []abi.Handle{pb.Handle()}})
	rec("splice_body", err)
	// Passing it on unread to the one sink cleared for it works.
	_, err = fetch(vault, abi.HTTPRequest{Method: "POST", URL: "/vault/store", BodyBlob: pb.Handle()})
	rec("vault_body_blob", err)
	raw, err := pb.Bytes()
	rec("read", err)
	var r struct {
		Fields struct{ Passport string } `json:"fields"`
	}
	json.Unmarshal(raw, &r)
	p := r.Fields.Passport
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/echo", Body: []byte(p)})
	rec("body_inline", err)
	js, _ := json.Marshal(map[string]string{"note": "harmless", "x": p})
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/echo", Body: js})
	rec("body_json", err)
	nb, err := mandate.NewBlob([]byte(p))
	rec("new_blob", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/echo", BodyBlob: nb.Handle()})
	rec("body_new_blob", err)
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
