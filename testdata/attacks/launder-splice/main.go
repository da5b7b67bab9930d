// Command launder-splice asks a kind to read a labelled blob for it and
// hand back the bytes: it never reads the passport blob itself; the test
// kind's "splice" op copies it into a result blob, and the vault (cleared
// for pii:alice) echoes it back in a response. If the result blob carries
// only the kind's label and the caller's, not the label of the blob that
// was spliced, the guest can read the copy without its label rising and
// send the passport to the public sink. Law 6 requires the result to
// carry the spliced blob's label.
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
	vault := must(mandate.Lookup("vault"))
	test := must(mandate.Lookup("test"))
	mydata := must(mandate.Lookup("mydata"))
	pb, _ := mydata.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`))
	args, _ := json.Marshal(map[string]abi.Handle{"blob": pb.Handle()})
	copied, err := test.Call("splice", args)
	rec("kind_splice", err)
	if err == nil {
		b, _ := copied.Bytes()
		note("kind_copy_has_passport", boolStr(strings.Contains(string(b), "P-ALICE")))
		_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/launder-kind", Body: b})
		rec("send_kind_copy", err)
	}
	// Through a sink cleared for it that echoes it back.
	req, _ := abi.EncodeHTTPRequest(abi.HTTPRequest{Method: "POST", URL: "/vault/echo", BodyBlob: pb.Handle()})
	eb, err := vault.Call("fetch", req)
	rec("vault_echo", err)
	if err == nil {
		raw, _ := eb.Bytes()
		resp, _ := abi.DecodeHTTPResponse(raw)
		note("echo_has_passport", boolStr(strings.Contains(string(resp.Body), "P-ALICE")))
		_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/launder-echo", Body: resp.Body})
		rec("send_echo_copy", err)
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
