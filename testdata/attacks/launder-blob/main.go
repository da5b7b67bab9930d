// Command launder-blob tries to lower a label by re-wrapping: it reads the
// passport, copies it into new blobs, pushes it through the test kind's
// echo, describes capabilities, reads its own input again, and sends each
// to the public sink. Whatever a task writes carries its label (law 6),
// a kind's result carries the caller's label, and the task's label never
// goes down: EFLOW for every send.
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

func main() {
	readInput()
	web := must(mandate.Lookup("web"))
	test := must(mandate.Lookup("test"))
	mydata := must(mandate.Lookup("mydata"))
	// A blob made before the read is public; it stays so.
	early, _ := mandate.NewBlob([]byte("made before reading"))
	pb, _ := mydata.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`))
	raw, err := pb.Bytes()
	rec("read", err)
	var r struct {
		Fields struct{ Passport string } `json:"fields"`
	}
	json.Unmarshal(raw, &r)
	p := []byte(r.Fields.Passport)
	copy1, _ := mandate.NewBlob(p)
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/echo", BodyBlob: copy1.Handle()})
	rec("copy", err)
	echoed, err := test.Call("echo", p)
	rec("echo_call", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/echo", BodyBlob: echoed.Handle()})
	rec("kind_echo", err)
	d, _ := web.Describe()
	db, _ := mandate.NewBlob(append(d, p...))
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/echo", BodyBlob: db.Handle()})
	rec("describe_wrap", err)
	// The early blob is public, but the task is not: the send is refused
	// for the task's own label, not only the blob's.
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/echo", BodyBlob: early.Handle()})
	rec("early_blob", err)
	// Dropping every tainted handle does not lower the label.
	pb.Drop()
	copy1.Drop()
	echoed.Drop()
	db.Drop()
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/after-drop"})
	rec("after_drop", err)
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
