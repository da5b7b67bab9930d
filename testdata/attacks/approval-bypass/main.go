// Command approval-bypass tries to get around a person's yes (the approver
// says no to everything): a charge above approve_above, a derive that
// raises approve_above, one that adds a "when" hoping to replace the
// threshold, a charge through a child task, a replayed idempotency key;
// on a net capability whose POSTs need approval, "post" in lower case, a
// method-override header on a GET, and a derive with approve_when "false".
// Every ancestor's approve_when and approve_above applies (law 5):
// EAPPROVAL or EDENIED, nothing charged or posted.
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/attacks/attack"
)

const charge90 = `{"payee":"airline.example","amount":"90.00","currency":"USD","idempotency_key":"approve-me"}`

func main() {
	in := attack.TryInput()
	card := attack.Must(mandate.Lookup("card"))
	if in.Mode == "child" {
		_, err := card.Call("charge", []byte(charge90))
		attack.Rec("charge", err)
		attack.Finish()
		return
	}
	_, err := card.Call("charge", []byte(charge90))
	attack.Rec("charge_above", err)
	_, err = card.Call("charge", []byte(charge90))
	attack.Rec("charge_replay", err)
	_, err = card.Derive(`{"approve_above":"100"}`)
	attack.Rec("derive_raise_threshold", err)
	low := attack.Must(card.Derive(`{"approve_above":"50"}`))
	_, err = low.Call("charge", []byte(`{"payee":"airline.example","amount":"60.00","currency":"USD"}`))
	attack.Rec("charge_lowered_threshold", err)
	w, err := card.Derive(`{"when":"true"}`)
	attack.Rec("derive_when_true", err)
	if err == nil {
		_, err = w.Call("charge", []byte(`{"payee":"airline.example","amount":"90.00","currency":"USD"}`))
		attack.Rec("charge_via_when_true", err)
	}
	sp := attack.Must(mandate.Lookup("spawner"))
	cin, _ := mandate.NewBlob([]byte(`{"mode":"child"}`))
	c, err := mandate.Spawn(sp, abi.SpawnRequest{Module: in.Self, Input: cin.Handle(),
		Caps: []abi.SpawnCap{{Handle: card.Handle(), Name: "card"}}})
	attack.Rec("spawn", err)
	if b, err := c.Wait(); err == nil {
		rb, _ := b.Bytes()
		var r map[string]string
		json.Unmarshal(rb, &r)
		attack.Set("child.charge", r["charge"])
	}

	tr := attack.Must(mandate.Lookup("transfer"))
	post := func(k, method string, hdr map[string][]string, c mandate.Cap) {
		req, _ := abi.EncodeHTTPRequest(abi.HTTPRequest{Method: method, URL: "/api/transfer", Header: hdr, Body: []byte(`{"amount":1000}`)})
		_, err := c.Call("fetch", req)
		attack.Rec(k, err)
	}
	post("post", "POST", nil, tr)
	post("post_lower", "post", nil, tr)
	post("post_mixed", "pOsT", nil, tr)
	post("get_override", "GET", map[string][]string{"X-HTTP-Method-Override": {"POST"}}, tr)
	nw, err := tr.Derive(`{"approve_when":"false"}`)
	attack.Rec("derive_approve_false", err)
	if err == nil {
		post("post_via_false", "POST", nil, nw)
	}
	getOnly, err := tr.Derive(`{"methods":["GET"]}`)
	attack.Rec("derive_get_only", err)
	if err == nil {
		post("post_via_get_only", "POST", nil, getOnly)
	}
	req, _ := abi.EncodeHTTPRequest(abi.HTTPRequest{Method: "GET", URL: "/api/transfer"})
	_, err = tr.Call("fetch", req)
	attack.Rec("get_needs_no_approval", err)
	attack.Finish()
}
