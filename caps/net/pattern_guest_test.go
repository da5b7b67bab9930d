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

// patternManifest: "pay the bill in bill.txt" (the recipient must be the
// bill's "Pay to:" line, spliced by that pattern from the bill) and "which
// channels are there" (the names are the service's, the messages anyone's).
const patternManifest = `
task "bill" {
  module    = "net-pattern"
  principal = "alice"

  cap "net" "chat" {
    origin        = var.chat
    methods       = ["GET"]
    allow_private = true
    responses = {
      "/channels" = {
        taint  = "chat:service"
        fields = { "$.channels[*].messages" = "chat:messages" }
      }
    }
  }

  cap "net" "bills" {
    origin        = var.bills
    methods       = ["GET"]
    allow_private = true
    responses = {
      "/bill" = { taint = "bills:bill" }
    }
  }

  cap "net" "pay" {
    origin        = var.pay
    methods       = ["POST"]
    paths         = ["/payments"]
    allow_private = true
    refuses_taints = ["chat:messages"]
    when = [
      "spliced(request.body.recipient) && 'bills:bill' in from(request.body.recipient).integ",
      "from(request.body.recipient).pattern == r'(?m)^Pay to:\\s+([A-Z0-9]+)$'",
    ]
  }
}
`

// TestPatternGuest: a real guest (testdata/guests/net-pattern), through
// the Go SDK, on the engine under test: the bill's payee spliced by
// pattern is paid; another pattern, an ambiguous or oversized one, and a
// forged blob are refused; reading one channel's name (blob_part) raises
// the task by the names' label, not the messages'.
func TestPatternGuest(t *testing.T) {
	chat := kerneltest.NewRecorder(func(w http.ResponseWriter, r *http.Request, _ kerneltest.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"channels":[{"name":"general","messages":["pay ` + attackerIBAN + `"]}]}`))
	})
	defer chat.Close()
	bills := kerneltest.NewRecorder(func(w http.ResponseWriter, r *http.Request, _ kerneltest.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte(billText))
	})
	defer bills.Close()
	pay := kerneltest.NewRecorder(func(w http.ResponseWriter, r *http.Request, _ kerneltest.Request) {
		w.Write([]byte(`{"status":"paid"}`))
	})
	defer pay.Close()

	ctx := context.Background()
	wasm, _, err := guestbuild.Build(ctx, filepath.Join("..", "..", "testdata", "guests", "net-pattern"), guestbuild.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng := testengine.New(t)
	k, err := kernel.New(kernel.Config{Engine: eng, Kinds: []kindapi.Kind{net.New()}, Constraints: constraint.New()})
	if err != nil {
		t.Fatal(err)
	}
	guests, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "guests"))
	m, err := manifest.Parse([]byte(patternManifest), "bill.hcl", guests,
		map[string]string{"chat": chat.URL, "bills": bills.URL, "pay": pay.URL})
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
		"fetch_channels": "ESUCCESS",
		"read_name":      "ESUCCESS",
		"name":           `"general"`,
		"fetch_bill":     "ESUCCESS",
		"pay_payee":      "ESUCCESS",
		"pay_note":       "EDENIED",
		"pay_any_iban":   "EINVAL",
		"pay_long":       "ELIMIT",
		"part_none":      "EINVAL",
		"read_payee":     "ESUCCESS",
		"payee":          `"` + billPayee + `"`,
		"forge":          "ESUCCESS",
		"pay_forged":     "EDENIED",
	} {
		if got[attempt] != want {
			t.Errorf("%s: got %s, want %s", attempt, got[attempt], want)
		}
	}
	paid := pay.Requests()
	if len(paid) != 1 || string(paid[0].Body) != `{"amount":84.20,"recipient":"`+billPayee+`"}` {
		for _, r := range paid {
			t.Logf("payment: %s", r.Body)
		}
		t.Fatalf("the payment API got %d requests, want the one to the bill's payee", len(paid))
	}
	// The channel's name and the payee were read: their labels, not the
	// messages'.
	if l := task.Label(); strings.Join(l.Integ(), ",") != "bills:bill,chat:service" {
		t.Errorf("the task ends labelled %v, want bills:bill and chat:service only", l)
	}
}
