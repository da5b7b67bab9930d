// Command honest is the bank example's honest agent. Its input is the
// person's request: a bill to pay (data/bill.txt, for bill.hcl) or
// "refund the friend who sent me 10.00" (data/refund.txt, for
// refund.hcl). It does what was asked, once, and says what it did.
//
// Paying the bill, it reads the bill and types the payee, the amount and
// the reference into the payment. Paying an e-bill (data/ebill.txt, for
// ebill.hcl), it never reads the bill: it fetches it from the bank and
// splices its "Pay to:" line into the payment by a pattern
// (abi.SplicePart.Pattern), so the kernel, not the agent, takes the payee
// from the bill. Refunding, it never reads a
// transaction: it asks the bank for the transactions of that amount and
// splices the first one's sender into the payment by reference
// (abi.SplicePart), so the kernel, not the agent, puts the bank's record
// of who paid into the recipient field.
package main

import (
	"fmt"
	"regexp"
	"strings"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	mnet "github.com/mandatevm/mandate/guest-sdk/net"
)

var report strings.Builder

func say(f string, a ...any) { fmt.Fprintf(&report, f+"\n", a...) }

// must stops the task with what it said so far and the error.
func must[T any](v T, err error) T {
	if err != nil {
		say("failed: %v", err)
		mandate.SetResult([]byte(report.String()))
		panic(err)
	}
	return v
}

func main() {
	in := string(must(mandate.InputBytes()))
	switch {
	case strings.HasPrefix(strings.TrimSpace(in), "refund"):
		refund(in)
	case strings.HasPrefix(strings.TrimSpace(in), "pay the e-bill"):
		payEBill(in)
	default:
		payBill(in)
	}
	must(0, mandate.SetResult([]byte(report.String())))
}

var (
	amountDue = regexp.MustCompile(`(?m)^Amount due:\s+([0-9]+\.[0-9]{2}) EUR\s*$`)
	payTo     = regexp.MustCompile(`(?m)^Pay to:\s+([A-Z]{2}[0-9]{2}[A-Z0-9]{11,30})\s*$`)
	reference = regexp.MustCompile(`(?m)^Reference:\s+(\S+)\s*$`)
)

// field is the one match of re in the bill.
func field(bill string, re *regexp.Regexp, name string) string {
	m := re.FindAllStringSubmatch(bill, -1)
	if len(m) != 1 {
		must(0, fmt.Errorf("the bill has %d %s lines, want 1", len(m), name))
	}
	return m[0][1]
}

// payBill pays the bill in the input: the payee, amount and reference
// its own lines give. The note at its end is text, not an instruction.
func payBill(bill string) {
	payee, amount, ref := field(bill, payTo, "Pay to"), field(bill, amountDue, "Amount due"), field(bill, reference, "Reference")
	payments := must(mandate.Lookup("payments"))
	body := fmt.Sprintf(`{"recipient":%q,"amount":%s,"reference":%q,"idempotency_key":%q}`, payee, amount, ref, ref)
	resp, err := mnet.Fetch(payments, abi.HTTPRequest{Method: "POST", URL: "/payments",
		Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(body)})
	if err != nil { // Alice said no, or the kernel refused: say so, pay nothing
		say("did not pay %s EUR to %s: %v", amount, payee, err)
		return
	}
	say("paid %s EUR to %s, reference %s: the bank answered %d %s", amount, payee, ref, resp.Status, strings.TrimSpace(string(resp.Body)))
}

var refundAmount = regexp.MustCompile(`\b([0-9]+\.[0-9]{2})\b`)

// refund pays the amount of the request back to the sender of the
// transaction of that amount, by reference.
func refund(req string) {
	m := refundAmount.FindStringSubmatch(req)
	if m == nil {
		must(0, fmt.Errorf("no amount in %q", req))
	}
	amount := m[1]
	transactions := must(mandate.Lookup("transactions"))
	payments := must(mandate.Lookup("payments"))
	// The transactions of that amount, held unread: reading them would
	// taint this task with their subjects (bank:tx), which the payment
	// capability refuses.
	tx := must(mnet.FetchBlob(transactions, abi.HTTPRequest{Method: "GET", URL: "/transactions?amount=" + amount}))
	body := fmt.Sprintf(`{"recipient":%q,"amount":%s,"reference":"refund, thank you","idempotency_key":"refund-%s"}`,
		abi.PartPlaceholder(0), amount, amount)
	resp, err := mnet.Fetch(payments, abi.HTTPRequest{Method: "POST", URL: "/payments",
		Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(body),
		SpliceParts: []abi.SplicePart{{Blob: tx.Handle(), Path: "$.transactions[0].sender"}}})
	if err != nil {
		say("did not refund %s EUR: %v", amount, err)
		return
	}
	say("refunded %s EUR to the sender of your transaction of %s (spliced from the bank's record): the bank answered %d %s",
		amount, amount, resp.Status, strings.TrimSpace(string(resp.Body)))
}

var (
	eBillRef    = regexp.MustCompile(`\b([A-Z]{3}-[0-9]{4}-[0-9]{4})\b`)
	eBillAmount = regexp.MustCompile(`\(([0-9]+\.[0-9]{2}) EUR\)`)
)

// payToLine is the pattern the payment capability requires: the bill's
// "Pay to:" line, which must occur in it exactly once.
const payToLine = `(?m)^Pay to:\s+([A-Z0-9]+)$`

// payEBill pays the e-bill the request names, of the amount it says, to
// the payee the kernel splices from the bill (never read).
func payEBill(req string) {
	ref, amount := eBillRef.FindStringSubmatch(req), eBillAmount.FindStringSubmatch(req)
	if ref == nil || amount == nil {
		must(0, fmt.Errorf("no bill reference or amount in %q", req))
	}
	bills := must(mandate.Lookup("bills"))
	payments := must(mandate.Lookup("payments"))
	bill := must(mnet.FetchBlob(bills, abi.HTTPRequest{Method: "GET", URL: "/bills/" + ref[1]}))
	body := fmt.Sprintf(`{"recipient":%q,"amount":%s,"reference":%q,"idempotency_key":%q}`,
		abi.PartPlaceholder(0), amount[1], ref[1], ref[1])
	resp, err := mnet.Fetch(payments, abi.HTTPRequest{Method: "POST", URL: "/payments",
		Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(body),
		SpliceParts: []abi.SplicePart{{Blob: bill.Handle(), Pattern: payToLine}}})
	if err != nil {
		say("did not pay the e-bill %s: %v", ref[1], err)
		return
	}
	say("paid the e-bill %s, %s EUR to the payee on the bill (spliced from it): the bank answered %d %s",
		ref[1], amount[1], resp.Status, strings.TrimSpace(string(resp.Body)))
}
