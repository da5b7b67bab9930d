package net_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/caps/net"
	"github.com/mandatevm/mandate/constraint"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// The provenance check of a spliced recipient, written as the docs write
// it (issue 30, item 6): `'bank:transactions.sender' in
// from(x).integ`. A part carries its field's taint joined with the label
// of the task that fetched it, so `from(x).integ ==
// ['bank:transactions.sender']` is false for an honest task that read
// anything else first (here its account's profile); the membership test
// holds for it, and still refuses what the attacker types, splices from
// elsewhere or writes itself.
const (
	provSender = `spliced(request.body.recipient) && 'bank:transactions.sender' in from(request.body.recipient).integ`
	provExact  = `spliced(request.body.recipient) && from(request.body.recipient).integ == ['bank:transactions.sender']`
)

func TestProvenanceAfterOtherReads(t *testing.T) {
	bank := kerneltest.NewRecorder(func(w http.ResponseWriter, r *http.Request, _ kerneltest.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/profile" {
			w.Write([]byte(`{"name":"Alice","currency":"EUR"}`))
			return
		}
		w.Write([]byte(bankTxBody))
	})
	t.Cleanup(bank.Close)
	pay := kerneltest.NewRecorder(func(w http.ResponseWriter, r *http.Request, _ kerneltest.Request) {
		w.Write([]byte(`{"status":"paid"}`))
	})
	t.Cleanup(pay.Close)
	ctx := context.Background()
	k, grant := constraintKernel(t)
	paySpec := `{"origin":"` + pay.URL + `","methods":["POST"],"paths":["/payments"],"allow_private":true,"refuses_taints":["bank:tx","web:*"]}`
	grants := []kernel.GrantSpec{
		grant("bank", `{"origin":"`+bank.URL+`","paths":["/transactions","/profile"],"allow_private":true,
		  "responses":{"/transactions":{"taint":"bank:tx","fields":{"$.transactions[*].sender":"bank:transactions.sender"}},
		               "/profile":{"taint":"bank:profile"}}}`),
		grant("pay", paySpec, provSender),
		grant("pay-exact", paySpec, provExact),
	}
	mod, _ := kerneltest.WaitEngine{}.Compile(ctx, nil)
	task, err := k.Start(ctx, kernel.TaskSpec{Module: mod, Principal: "alice", Limits: kernel.Limits{Timeout: time.Minute}, Grants: grants})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(task.Kill)
	h := map[string]abi.Handle{}
	for _, g := range grants {
		if h[g.Name], err = task.Lookup(ctx, g.Name); err != nil {
			t.Fatal(err)
		}
	}
	fetch := func(c abi.Handle, r abi.HTTPRequest) (abi.Handle, error) {
		t.Helper()
		args, err := abi.EncodeHTTPRequest(r)
		if err != nil {
			t.Fatal(err)
		}
		return task.Invoke(ctx, c, abi.NetFetchOp, args)
	}

	// The honest agent reads its profile first: the task now carries
	// bank:profile, and so does everything it fetches after.
	profile, err := fetch(h["bank"], abi.HTTPRequest{Method: "GET", URL: "/profile"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := task.ReadBlob(ctx, profile, 0, make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}
	tx, err := fetch(h["bank"], abi.HTTPRequest{Method: "GET", URL: "/transactions"})
	if err != nil {
		t.Fatal(err)
	}
	typed, err := task.CreateBlob(ctx, []byte(`{"iban":"`+attackerIBAN+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	ph := abi.PartPlaceholder(0)
	for _, c := range []struct {
		name, cap string
		req       abi.HTTPRequest
		errno     abi.Errno
		why       string
	}{
		{"the sender, after reading the profile (==)", "pay-exact",
			payment(tx, `{"recipient":"`+ph+`","amount":"10.00"}`, "$.transactions[0].sender"), abi.EDENIED, "does not hold"},
		{"the sender, after reading the profile (in)", "pay",
			payment(tx, `{"recipient":"`+ph+`","amount":"10.00"}`, "$.transactions[0].sender"), abi.ESUCCESS, ""},
		{"the attacker's IBAN typed", "pay",
			payment(tx, `{"recipient":"`+attackerIBAN+`","amount":"10.00"}`), abi.EDENIED, "does not hold"},
		{"the attacker's IBAN typed, the sender spliced elsewhere", "pay",
			payment(tx, `{"recipient":"`+attackerIBAN+`","memo":"`+ph+`"}`, "$.transactions[0].sender"), abi.EDENIED, "does not hold"},
		{"the attacker's IBAN in a blob the task wrote", "pay",
			payment(typed, `{"recipient":"`+ph+`","amount":"10.00"}`, "$.iban"), abi.EDENIED, "does not hold"},
		{"the subject, naming the attacker", "pay",
			payment(tx, `{"recipient":"`+ph+`","amount":"10.00"}`, "$.transactions[0].subject"), abi.EFLOW, "bank:tx"},
	} {
		_, err := fetch(h[c.cap], c.req)
		if got := kindapi.ErrnoOf(err); got != c.errno || (c.why != "" && !strings.Contains(err.Error(), c.why)) {
			t.Errorf("%s: %v (%s), want %s mentioning %q", c.name, err, got, c.errno, c.why)
		}
	}
	paid := pay.Requests()
	if len(paid) != 1 || !strings.Contains(string(paid[0].Body), bankSender) || strings.Contains(string(paid[0].Body), attackerIBAN) {
		t.Errorf("the payment API got %d requests (%v), want the one to the sender", len(paid), paid)
	}
}

// constraintKernel is a kernel with the net kind and constraints, on an
// engine that runs nothing (tasks wait), and grant, which makes a net
// grant of spec named name with the constraints when.
func constraintKernel(t *testing.T) (*kernel.Kernel, func(name, spec string, when ...string) kernel.GrantSpec) {
	t.Helper()
	k, err := kernel.New(kernel.Config{Engine: kerneltest.WaitEngine{}, Kinds: []kindapi.Kind{net.New()}, Constraints: constraint.New()})
	if err != nil {
		t.Fatal(err)
	}
	return k, func(name, spec string, when ...string) kernel.GrantSpec {
		t.Helper()
		s, err := k.Grant("net", kindapi.GrantContext{}, []byte(spec))
		if err != nil {
			t.Fatalf("grant %s: %v", spec, err)
		}
		cons, err := k.CompileConstraints("net", when, nil)
		if err != nil {
			t.Fatal(err)
		}
		return kernel.GrantSpec{Kind: "net", Name: name, Scope: s, Constraints: cons}
	}
}
