package net_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/caps/net"
	"github.com/mandatevm/mandate/constraint"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/manifest"
)

// bankManifest is what a careful user writes for "refund the friend who
// sent me 10.00": the bank's record of the sender is trusted, the rest of
// a transaction is not, and the payment goes only to a recipient spliced
// from that record.
const bankManifest = `
task "refund" {
  module    = "net-parts"
  principal = "alice"

  cap "net" "bank" {
    origin        = var.bank
    allow_private = true
    responses = {
      "/transactions" = {
        taint  = "bank:tx"
        fields = { "$.transactions[*].sender" = "bank:transactions.sender" }
      }
    }
  }

  cap "net" "pay" {
    origin         = var.pay
    methods        = ["POST"]
    paths          = ["/payments"]
    allow_private  = true
    refuses_taints = ["bank:tx", "web:*"]
    when = "spliced(request.body.recipient) && from(request.body.recipient).integ == ['bank:transactions.sender']"
  }
}
`

// TestBankGuest: a real guest (testdata/guests/net-parts) under the
// manifest above: the sender spliced by part is paid, the subject, the
// whole transaction and a typed recipient are refused, and so is any
// payment once it read the statement; the API sees one payment, to the
// sender.
func TestBankGuest(t *testing.T) {
	bank := kerneltest.NewRecorder(func(w http.ResponseWriter, r *http.Request, _ kerneltest.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(bankTxBody))
	})
	defer bank.Close()
	pay := kerneltest.NewRecorder(func(w http.ResponseWriter, r *http.Request, _ kerneltest.Request) {
		w.Write([]byte(`{"status":"paid"}`))
	})
	defer pay.Close()

	ctx := context.Background()
	wasm, _, err := guestbuild.Build(ctx, filepath.Join("..", "..", "testdata", "guests", "net-parts"), guestbuild.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng := testengine.New(t)
	audit := &auditLog{}
	k, err := kernel.New(kernel.Config{Engine: eng, Kinds: []kindapi.Kind{net.New()}, Constraints: constraint.New(), Auditor: audit})
	if err != nil {
		t.Fatal(err)
	}
	guests, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "guests"))
	m, err := manifest.Parse([]byte(bankManifest), "refund.hcl", guests, map[string]string{"bank": bank.URL, "pay": pay.URL})
	if err != nil {
		t.Fatal(err)
	}
	grants, err := m.Grants(k)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := eng.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	task, err := k.Run(ctx, kernel.TaskSpec{Module: mod, Principal: "alice", Limits: kernel.Limits{Timeout: time.Minute}, Grants: grants})
	if err != nil {
		t.Fatalf("%v\n%s", err, task.Stderr())
	}
	raw, _ := task.Result()
	var got map[string]string
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("result %q: %v", raw, err)
	}
	for attempt, want := range map[string]string{
		"fetch":           "ESUCCESS",
		"pay_sender":      "ESUCCESS",
		"pay_subject":     "EFLOW",
		"pay_transaction": "EFLOW",
		"pay_typed":       "EDENIED",
		"read":            "ESUCCESS",
		"pay_after_read":  "EFLOW",
	} {
		if got[attempt] != want {
			t.Errorf("%s: got %s, want %s", attempt, got[attempt], want)
		}
	}
	if !strings.Contains(got["subject_seen"], attackerIBAN) {
		t.Errorf("the guest did not read the injected subject: %q", got["subject_seen"])
	}
	paid := pay.Requests()
	if len(paid) != 1 || string(paid[0].Body) != `{"amount":"10.00","recipient":"`+bankSender+`"}` {
		for _, r := range paid {
			t.Logf("payment: %s", r.Body)
		}
		t.Fatalf("the payment API got %d requests, want the one to the sender", len(paid))
	}
	if l := task.Label(); strings.Join(l.Integ(), ",") != "bank:transactions.sender,bank:tx" {
		t.Errorf("the task ends labelled %v", l)
	}
	audit.mu.Lock()
	defer audit.mu.Unlock()
	denials := map[string]int{}
	for _, ev := range audit.evs {
		if ev.Errno != 0 {
			denials[ev.Errno.String()]++
		}
	}
	if denials["EFLOW"] != 3 || denials["EDENIED"] != 1 {
		t.Errorf("audited denials %v, want 3 EFLOW and 1 EDENIED", denials)
	}
}
