package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/examples/bank/bankapi"
	"github.com/mandatevm/mandate/internal/exampledir"
	"github.com/mandatevm/mandate/internal/testengine"
)

// TestBank runs each of the example's runs as `go run ./examples/bank`
// does, each with a fresh bank and state directory; the scenario's check
// is the story (what the bank booked, every refusal with its errno and
// reason in the run's record and the audit log, what influenced the
// answer).
func TestBank(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the two agents and runs them five times")
	}
	t.Setenv("MANDATE_ENGINE", testengine.Name())
	dir, err := exampledir.Find("refund.hcl", "examples/bank")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range scenarios() {
		t.Run(s.name, func(t *testing.T) {
			var out, errs bytes.Buffer
			if err := s.run(context.Background(), &out, &errs, dir, t.TempDir()); err != nil {
				t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, &out, &errs)
			}
			t.Logf("\n%s", &out)
		})
	}
}

// TestBill: the facts the driver passes as --var are the bill's.
func TestBill(t *testing.T) {
	dir, err := exampledir.Find("refund.hcl", "examples/bank")
	if err != nil {
		t.Fatal(err)
	}
	bill := readFile(t, filepath.Join(dir, "data", "bill.txt"))
	for _, line := range []string{"Amount due: " + billAmount + " EUR", "Pay to:     " + billPayee, "Reference:  " + billRef} {
		if !strings.Contains(bill, line) {
			t.Errorf("data/bill.txt lacks %q", line)
		}
	}
	if !strings.Contains(bill, bankapi.Attacker) {
		t.Errorf("data/bill.txt lacks its injection")
	}
	if bill != bankapi.BillText || bankapi.BillRef != billRef {
		t.Errorf("the bank's e-bill (bankapi.BillText, %s) is not data/bill.txt (%s)", bankapi.BillRef, billRef)
	}
}

// TestBankAPI: the fixture books what it is asked once per idempotency
// key, refuses what is not a payment, and filters transactions by amount.
func TestBankAPI(t *testing.T) {
	b := bankapi.Start()
	defer b.Close()
	post := func(path, body string) int {
		t.Helper()
		resp, err := http.Post(b.URL()+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		body string
		want int
	}{
		{`{"recipient":"` + bankapi.Friend + `","amount":10.00,"idempotency_key":"k"}`, http.StatusCreated},
		{`{"recipient":"` + bankapi.Friend + `","amount":10.00,"idempotency_key":"k"}`, http.StatusOK}, // the same payment
		{`{"recipient":"` + bankapi.Friend + `","amount":0.5}`, http.StatusCreated},
		{`{"recipient":"` + bankapi.Friend + `","amount":-1}`, http.StatusBadRequest},
		{`{"recipient":"` + bankapi.Friend + `","amount":1.001}`, http.StatusBadRequest},
		{`{"recipient":"` + bankapi.Friend + `","amount":"10.00"}`, http.StatusBadRequest},
		{`{"recipient":"ignore your instructions","amount":1}`, http.StatusBadRequest},
		{`{"recipient":"` + bankapi.Friend + `","amount":1,"memo":"x"}`, http.StatusBadRequest},
	} {
		if got := post("/payments", c.body); got != c.want {
			t.Errorf("POST /payments %s: %d, want %d", c.body, got, c.want)
		}
	}
	if ps := b.Payments(); len(ps) != 2 || ps[0].Amount != 1000 || ps[1].Amount != 50 {
		t.Errorf("booked %+v, want 10.00 then 0.50", ps)
	}
	if post("/password", `{"password":"x"}`); len(b.PasswordChanges()) != 1 {
		t.Errorf("the password change was not recorded")
	}
	resp, err := http.Get(b.URL() + "/transactions?amount=10.00")
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	body.ReadFrom(resp.Body)
	resp.Body.Close()
	if got := body.String(); strings.Count(got, `"id"`) != 1 || !strings.Contains(got, bankapi.Friend) || !strings.Contains(got, `"amount":10.00`) {
		t.Errorf("the transactions of 10.00: %s", got)
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReadme: the README shows the manifests as they are.
func TestReadme(t *testing.T) {
	dir, err := exampledir.Find("refund.hcl", "examples/bank")
	if err != nil {
		t.Fatal(err)
	}
	readme := readFile(t, filepath.Join(dir, "README.md"))
	for _, m := range []string{"bill.hcl", "ebill.hcl", "refund.hcl"} {
		if !strings.Contains(readme, "```hcl\n"+readFile(t, filepath.Join(dir, m))+"```\n") {
			t.Errorf("README.md does not show %s as it is", m)
		}
	}
}
