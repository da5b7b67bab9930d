// Command approval-mints tries to have a remembered yes (approve_mints)
// cover an effect the person never saw. The person approves one POST to
// /api/transfer whose 556-byte body ends "amount":10} (shown cut at 512
// bytes); the guest then sends bodies of the same length and the same
// first 512 bytes ending "amount":99}: inline, and spliced from a blob.
// Then it has a body sent from a blob approved, and sends another blob of
// the same size that differs only in its last bytes. Each must ask again
// (the approver says no to every 99), and only the approved bodies reach
// the server: the same body again needs no second question.
package main

import (
	"strings"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

// body is 556 bytes: a note padding the first 512 bytes, then the amount.
func body(amount string) []byte {
	head := `{"to":"bob","note":"` + strings.Repeat("x", 556-len(`{"to":"bob","note":"","amount":10}`)) + `","amount":`
	return []byte(head + amount + "}")
}

func main() {
	attack.TryInput()
	tr := attack.Must(mandate.Lookup("transfer"))
	post := func(k string, b []byte, blob bool) {
		r := abi.HTTPRequest{Method: "POST", URL: "/api/transfer", Header: map[string][]string{"Content-Type": {"application/json"}}}
		if blob {
			bl, err := mandate.NewBlob(b)
			if err != nil {
				attack.Rec(k+"_blob", err)
				return
			}
			r.BodyBlob = bl.Handle()
		} else {
			r.Body = b
		}
		req, _ := abi.EncodeHTTPRequest(r)
		_, err := tr.Call("fetch", req)
		attack.Rec(k, err)
	}
	post("approved", body("10"), false)
	post("same_again", body("10"), false)
	post("same_prefix_inline", body("99"), false)
	post("same_prefix_blob", body("99"), true)
	post("blob_approved", body("11"), true)
	post("blob_again", body("11"), true)
	post("blob_other_contents", body("98"), true)
	attack.Finish()
}
