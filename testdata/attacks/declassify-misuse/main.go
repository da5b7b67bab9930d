// Command declassify-misuse abuses a declassify capability granted to drop
// pii:alice after projecting onto fields.plan: it declassifies a record
// that also carries financial:alice, asks for wider drops and projections,
// feeds it garbage, and after reading the passport itself tries to use a
// declassified blob to clear its own label. Declassification is projected,
// audited and never lowers the caller (caps/declassify, law 6): only the
// plan ever leaves.
package main

import (
	"encoding/json"
	"strings"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

func main() {
	attack.ReadInput()
	web := attack.Must(mandate.Lookup("web"))
	dc := attack.Must(mandate.Lookup("declass"))
	mydata := attack.Must(mandate.Lookup("mydata"))
	declass := func(h abi.Handle) (mandate.Blob, error) {
		a, _ := json.Marshal(map[string]abi.Handle{"blob": h})
		return dc.Call("declassify", a)
	}
	// Legitimate: the plan of a record that also holds the passport.
	rec1, _ := mydata.Call("read", []byte(`{"owner":"alice","fields":["plan","passport"]}`))
	d1, err := declass(rec1.Handle())
	attack.Rec("declassify_plan", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/declassified", BodyBlob: d1.Handle()})
	attack.Rec("send_declassified", err)
	// A record with the salary too: financial:alice is not dropped.
	rec2, _ := mydata.Call("read", []byte(`{"owner":"alice","fields":["plan","salary"]}`))
	d2, err := declass(rec2.Handle())
	attack.Rec("declassify_financial", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/declassified-financial", BodyBlob: d2.Handle()})
	attack.Rec("send_financial", err)
	// Wider capabilities.
	_, err = dc.Derive(`{"drop":["pii:alice","financial:alice"]}`)
	attack.Rec("derive_more_drop", err)
	_, err = dc.Derive(`{"project":["fields.passport"]}`)
	attack.Rec("derive_project_passport", err)
	_, err = dc.Derive(`{"project":["fields"]}`)
	attack.Rec("derive_project_parent", err)
	// Garbage.
	g, _ := mandate.NewBlob([]byte("not json"))
	_, err = declass(g.Handle())
	attack.Rec("declassify_garbage", err)
	_, err = declass(web.Handle())
	attack.Rec("declassify_cap", err)
	// The caller's own label never goes down.
	rb, _ := rec1.Bytes()
	attack.Note("read_passport", boolStr(strings.Contains(string(rb), "P-ALICE")))
	d3, err := declass(rec1.Handle())
	attack.Rec("declassify_after_read", err)
	if err == nil {
		b, _ := d3.Bytes()
		_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/declassified-after", Body: b})
		attack.Rec("send_after_read", err)
	}
	attack.Finish()
}

func fetch(c mandate.Cap, r abi.HTTPRequest) (mandate.Blob, error) {
	b, _ := abi.EncodeHTTPRequest(r)
	return c.Call("fetch", b)
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
