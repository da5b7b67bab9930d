// Command net-pattern is an agent asked to "pay the bill in bill.txt" and
// to say which channels a chat has. It splices the bill's payee by a
// pattern, never reading the bill, then tries what a hijacked agent would
// (the note's IBAN by another pattern, an IBAN anywhere, an oversized
// pattern, the attacker's IBAN in a blob of its own); it reads one
// channel's name (blob_part), not the messages, and the payee by pattern.
// It reports each attempt's errno, and what it read.
package main

import (
	"encoding/json"
	"strings"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	mnet "github.com/mandatevm/mandate/guest-sdk/net"
)

const payTo = `(?m)^Pay to:\s+([A-Z0-9]+)$`

var out = map[string]string{}

func rec(k string, err error) { out[k] = mandate.ErrnoOf(err).String() }

// pay posts a payment whose recipient is the part of b by pattern.
func pay(c mandate.Cap, b mandate.Blob, pattern string) error {
	r := abi.HTTPRequest{Method: "POST", URL: "/payments",
		Body:        []byte(`{"recipient":"` + abi.PartPlaceholder(0) + `","amount":84.20}`),
		SpliceParts: []abi.SplicePart{{Blob: b.Handle(), Pattern: pattern}}}
	resp, err := mnet.FetchBlob(c, r)
	if err == nil {
		resp.Drop()
	}
	return err
}

func main() {
	chat, _ := mandate.Lookup("chat")
	bills, _ := mandate.Lookup("bills")
	payments, _ := mandate.Lookup("pay")

	channels, err := mnet.FetchBlob(chat, abi.HTTPRequest{Method: "GET", URL: "/channels"})
	rec("fetch_channels", err)
	name, err := channels.ReadPart("$.channels[0].name", "")
	rec("read_name", err)
	out["name"] = string(name)

	bill, err := mnet.FetchBlob(bills, abi.HTTPRequest{Method: "GET", URL: "/bill"})
	rec("fetch_bill", err)
	rec("pay_payee", pay(payments, bill, payTo))
	rec("pay_note", pay(payments, bill, `pay (GB00[A-Z0-9]+)`))
	rec("pay_any_iban", pay(payments, bill, `([A-Z]{2}[0-9]{2}[A-Z0-9]{11,30})`))
	rec("pay_long", pay(payments, bill, "("+strings.Repeat("a", abi.MaxPatternLen)+")"))
	_, err = bill.Part("", `(no such line)`)
	rec("part_none", err)

	payee, err := bill.ReadPart("", payTo)
	rec("read_payee", err)
	out["payee"] = string(payee)

	// Hijacked: it now carries the bill's label; a blob of its own with
	// the attacker's IBAN carries it too.
	forged, err := mandate.NewBlob([]byte("Pay to: GB00ATTACKER0000000000\n"))
	rec("forge", err)
	rec("pay_forged", pay(payments, forged, payTo))

	b, _ := json.Marshal(out)
	mandate.SetResult(b)
}
