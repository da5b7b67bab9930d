// Command exfil-result launders through a child's result: a child (given
// Alice's data) reads her passport and returns it as its result to a
// parent that never read it. The result blob carries the child's label
// (law 6): the parent cannot splice it to a public sink or send it as a
// body (law 7), and reading it taints the parent.
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

func main() {
	raw, _ := mandate.InputBytes()
	var in input
	json.Unmarshal(raw, &in)
	if in.Mode == "child" {
		d := must(mandate.Lookup("mydata"))
		b, err := d.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`))
		if err != nil {
			panic(err)
		}
		rb, _ := b.Bytes()
		var r struct {
			Fields struct{ Passport string } `json:"fields"`
		}
		json.Unmarshal(rb, &r)
		mandate.SetResult([]byte(r.Fields.Passport))
		return
	}
	sp := must(mandate.Lookup("spawner"))
	web := must(mandate.Lookup("web"))
	mydata := must(mandate.Lookup("mydata"))
	cin, _ := mandate.NewBlob([]byte(`{"mode":"child"}`))
	c, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: cin.Handle(),
		Caps: []abi.SpawnCap{{Handle: mydata.Handle(), Name: "mydata"}}})
	rec("spawn", err)
	rb, err := c.Wait()
	rec("wait", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/echo", BodyBlob: rb.Handle()})
	rec("result_as_body", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/r?x=" + abi.SplicePlaceholder(0), Splice: []abi.Handle{rb.Handle()}})
	rec("result_spliced", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "GET", URL: "/api/before-reading-result"})
	rec("clean_before_read", err)
	p, err := rb.Bytes()
	rec("read_result", err)
	_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/echo", Body: p})
	rec("result_inline", err)
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
