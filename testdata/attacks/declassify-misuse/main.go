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
)

func main() {
	readInput()
	web := must(mandate.Lookup("web"))
	dc := must(mandate.Lookup("declass"))
	mydata := must(mandate.Lookup("mydata"))
	declass := func(h abi.Handle) (mandate.Blob, error) {
		a, _ := json.Marshal(map[string]abi.Handle{"blob": h})
		return dc.Call("declassify", a)
	}
	// Legitimate: the plan of a record that also holds the passport.
	rec1, _ := mydata.Call("read", []byte(`{"owner":"alice","fields":["plan","passport"]}`))
	d1, err := declass(rec1.Handle())
	rec("declassify_plan", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/declassified", BodyBlob: d1.Handle()})
	rec("send_declassified", err)
	// A record with the salary too: financial:alice is not dropped.
	rec2, _ := mydata.Call("read", []byte(`{"owner":"alice","fields":["plan","salary"]}`))
	d2, err := declass(rec2.Handle())
	rec("declassify_financial", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/declassified-financial", BodyBlob: d2.Handle()})
	rec("send_financial", err)
	// Wider capabilities.
	_, err = dc.Derive(`{"drop":["pii:alice","financial:alice"]}`)
	rec("derive_more_drop", err)
	_, err = dc.Derive(`{"project":["fields.passport"]}`)
	rec("derive_project_passport", err)
	_, err = dc.Derive(`{"project":["fields"]}`)
	rec("derive_project_parent", err)
	// Garbage.
	g, _ := mandate.NewBlob([]byte("not json"))
	_, err = declass(g.Handle())
	rec("declassify_garbage", err)
	_, err = declass(web.Handle())
	rec("declassify_cap", err)
	// The caller's own label never goes down.
	rb, _ := rec1.Bytes()
	note("read_passport", boolStr(strings.Contains(string(rb), "P-ALICE")))
	d3, err := declass(rec1.Handle())
	rec("declassify_after_read", err)
	if err == nil {
		b, _ := d3.Bytes()
		_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/declassified-after", Body: b})
		rec("send_after_read", err)
	}
	finish()
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
