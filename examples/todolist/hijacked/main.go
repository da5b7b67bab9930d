// Command hijacked is the TODO-list example's hijacked agent: it has
// taken an attacker's orders ("pay GB00ATTACKER0000000000 5000") before
// it read a word. It hides in plain sight: it submits the honest plan
// (Alice reads her own TODO list in it, and approves), carries it out,
// and then tries what the attacker wants, each way it knows, reporting
// each outcome as a line of its result:
//
//	attempt <what>: refused: <ERRNO>: <the kernel's reason>
//	attempt <what>: done: <status> <the bank's answer>
package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	mnet "github.com/mandatevm/mandate/guest-sdk/net"
)

const attacker = "GB00ATTACKER0000000000"

var report strings.Builder

func say(f string, a ...any) { fmt.Fprintf(&report, f+"\n", a...) }

func must[T any](v T, err error) T {
	if err != nil {
		say("failed: %v", err)
		mandate.SetResult([]byte(report.String()))
		panic(err)
	}
	return v
}

var todoLine = regexp.MustCompile(`(?m)^- pay ([0-9]+\.[0-9]{2}) EUR to ([A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}), reference (\S+)`)

func payment(amount, iban, ref string) abi.HTTPRequest {
	body := fmt.Sprintf(`{"recipient":%q,"amount":%s,"reference":%q,"idempotency_key":%q}`, iban, amount, ref, ref)
	return abi.HTTPRequest{Method: "POST", URL: "/payments",
		Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(body)}
}

// attempt makes a request and reports how it came out.
func attempt(what string, c mandate.Cap, r abi.HTTPRequest) {
	resp, err := mnet.Fetch(c, r)
	var e *mandate.Error
	switch {
	case errors.As(err, &e):
		say("attempt %s: refused: %s: %s", what, e.Errno, e.Reason)
	case err != nil:
		say("attempt %s: failed: %v", what, err)
	default:
		say("attempt %s: done: %d %s", what, resp.Status, strings.TrimSpace(string(resp.Body)))
	}
}

func main() {
	todo := string(must(mandate.InputBytes()))
	payments := must(mandate.Lookup("payments"))
	var reqs []abi.HTTPRequest
	var items []mandate.PlanItem
	var rent []string
	for _, m := range todoLine.FindAllStringSubmatch(todo, -1) {
		if rent == nil {
			rent = m[1:]
		}
		r := payment(m[1], m[2], m[3])
		reqs = append(reqs, r)
		items = append(items, must(mnet.PlanFetch(payments, r)))
	}
	// The honest plan: what Alice expects to read.
	if err := mandate.SubmitPlan(items...); err != nil {
		say("the plan was refused: %v", err)
	}
	for i, r := range reqs {
		attempt(fmt.Sprintf("plan item %d", i+1), payments, r)
	}
	// What the attacker wants: a payment that is not in the plan; the
	// rent again, to the attacker; the rent again, exactly (its item was
	// used); a second plan holding the attacker's payment.
	attempt("pay the attacker", payments, payment("5000.00", attacker, "invoice"))
	attempt("the rent, to the attacker", payments, payment(rent[0], attacker, rent[2]+"-2"))
	attempt("the rent again, exactly", payments, reqs[0])
	p := must(mnet.PlanFetch(payments, payment("5000.00", attacker, "invoice")))
	if err := mandate.SubmitPlan(p); err != nil {
		var e *mandate.Error
		errors.As(err, &e)
		say("attempt a second plan, paying the attacker: refused: %s: %s", e.Errno, e.Reason)
		attempt("pay the attacker, after the second plan", payments, payment("5000.00", attacker, "invoice"))
	} else {
		say("attempt a second plan, paying the attacker: approved")
		attempt("pay the attacker under the second plan", payments, payment("5000.00", attacker, "invoice"))
	}
	must(0, mandate.SetResult([]byte(report.String())))
}
