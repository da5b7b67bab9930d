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
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

func main() {
	attack.ReadInput()
	web := attack.Must(mandate.Lookup("web"))
	test := attack.Must(mandate.Lookup("test"))
	mydata := attack.Must(mandate.Lookup("mydata"))
	// A blob made before the read is public; it stays so.
	early, _ := mandate.NewBlob([]byte("made before reading"))
	pb, _ := mydata.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`))
	raw, err := pb.Bytes()
	attack.Rec("read", err)
	var r struct {
		Fields struct{ Passport string } `json:"fields"`
	}
	json.Unmarshal(raw, &r)
	p := []byte(r.Fields.Passport)
	copy1, _ := mandate.NewBlob(p)
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/echo", BodyBlob: copy1.Handle()})
	attack.Rec("copy", err)
	echoed, err := test.Call("echo", p)
	attack.Rec("echo_call", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/echo", BodyBlob: echoed.Handle()})
	attack.Rec("kind_echo", err)
	d, _ := web.Describe()
	db, _ := mandate.NewBlob(append(d, p...))
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/echo", BodyBlob: db.Handle()})
	attack.Rec("describe_wrap", err)
	// The early blob is public, but the task is not: the send is refused
	// for the task's own label, not only the blob's.
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/echo", BodyBlob: early.Handle()})
	attack.Rec("early_blob", err)
	// Dropping every tainted handle does not lower the label.
	pb.Drop()
	copy1.Drop()
	echoed.Drop()
	db.Drop()
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/after-drop"})
	attack.Rec("after_drop", err)
	attack.Finish()
}

func fetch(c mandate.Cap, r abi.HTTPRequest) (mandate.Blob, error) {
	b, _ := abi.EncodeHTTPRequest(r)
	return c.Call("fetch", b)
}
