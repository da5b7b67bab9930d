// Command honest is the TODO-list example's honest agent. Its input is
// Alice's TODO list (data/todo.txt): payments, one a line. It submits
// them as one plan (mandate.SubmitPlan: every request it will make,
// exactly), and once Alice approved the plan makes each payment, in
// order, saying what it did.
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

// todoLine is "- pay AMOUNT EUR to IBAN, reference REF (what)".
var todoLine = regexp.MustCompile(`(?m)^- pay ([0-9]+\.[0-9]{2}) EUR to ([A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}), reference (\S+)`)

func payment(amount, iban, ref string) abi.HTTPRequest {
	body := fmt.Sprintf(`{"recipient":%q,"amount":%s,"reference":%q,"idempotency_key":%q}`, iban, amount, ref, ref)
	return abi.HTTPRequest{Method: "POST", URL: "/payments",
		Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(body)}
}

func main() {
	todo := string(must(mandate.InputBytes()))
	payments := must(mandate.Lookup("payments"))
	var reqs []abi.HTTPRequest
	var items []mandate.PlanItem
	for _, m := range todoLine.FindAllStringSubmatch(todo, -1) {
		r := payment(m[1], m[2], m[3])
		reqs = append(reqs, r)
		items = append(items, must(mnet.PlanFetch(payments, r)))
		say("plan: pay %s EUR to %s, reference %s", m[1], m[2], m[3])
	}
	if err := mandate.SubmitPlan(items...); err != nil {
		say("Alice did not approve the plan: %v; nothing paid", err)
		must(0, mandate.SetResult([]byte(report.String())))
		return
	}
	for _, r := range reqs {
		resp, err := mnet.Fetch(payments, r)
		if err != nil {
			say("did not pay: %v", err)
			continue
		}
		say("paid: the bank answered %d %s", resp.Status, strings.TrimSpace(string(resp.Body)))
	}
	must(0, mandate.SetResult([]byte(report.String())))
}
