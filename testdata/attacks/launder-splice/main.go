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
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

func main() {
	attack.ReadInput()
	web := attack.Must(mandate.Lookup("web"))
	vault := attack.Must(mandate.Lookup("vault"))
	test := attack.Must(mandate.Lookup("test"))
	mydata := attack.Must(mandate.Lookup("mydata"))
	pb, _ := mydata.Call("read", []byte(`{"owner":"alice","fields":["passport"]}`))
	args, _ := json.Marshal(map[string]abi.Handle{"blob": pb.Handle()})
	copied, err := test.Call("splice", args)
	attack.Rec("kind_splice", err)
	if err == nil {
		b, _ := copied.Bytes()
		attack.Note("kind_copy_has_passport", boolStr(strings.Contains(string(b), "P-ALICE")))
		_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/launder-kind", Body: b})
		attack.Rec("send_kind_copy", err)
	}
	// Through a sink cleared for it that echoes it back.
	req, _ := abi.EncodeHTTPRequest(abi.HTTPRequest{Method: "POST", URL: "/vault/echo", BodyBlob: pb.Handle()})
	eb, err := vault.Call("fetch", req)
	attack.Rec("vault_echo", err)
	if err == nil {
		raw, _ := eb.Bytes()
		resp, _ := abi.DecodeHTTPResponse(raw)
		attack.Note("echo_has_passport", boolStr(strings.Contains(string(resp.Body), "P-ALICE")))
		_, err = fetch(web, abi.HTTPRequest{Method: "POST", URL: "/api/launder-echo", Body: resp.Body})
		attack.Rec("send_echo_copy", err)
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
