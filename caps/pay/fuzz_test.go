package pay

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/caps/pay/paytest"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/kernel/kindapi/kindtest"
)

const fuzzInstrument = "tok_fuzz_4242_SECRET_q1w2e3"

var fuzzGC = kindapi.GrantContext{LookupEnv: func(name string) (string, bool) {
	if name == "PAY_FUZZ_CARD" {
		return fuzzInstrument, true
	}
	return "", false
}}

func fuzzKind() *Kind {
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	return New(WithClock(func() time.Time { return now }))
}

// FuzzParseDecimal: an accepted amount is within 0..MaxMinor and its
// canonical form parses back to it.
func FuzzParseDecimal(f *testing.F) {
	for _, s := range []string{
		"612", "612.5", "612.00", "0", "0.01", "10000000000000.00", "9999999999999999", "99999999999999999", ".5", "5.",
		"1e3", "-1", "+1", " 1", "NaN", "1.234", "٣", "00012.3",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseDecimal(s)
		if err != nil {
			return
		}
		if v < 0 || v > MaxMinor {
			t.Fatalf("parseDecimal(%q) = %d: out of range", s, v)
		}
		c := formatMinor(v)
		if v2, err := parseDecimal(c); err != nil || v2 != v {
			t.Fatalf("parseDecimal(%q) = %d, formatted %q, which parses as %d, %v", s, v, c, v2, err)
		}
	})
}

// FuzzParseMoney: an accepted amount with a currency names that currency,
// upper-cased, and is the amount without it.
func FuzzParseMoney(f *testing.F) {
	for _, s := range []string{"800", "800.00 USD", "800 usd", "800 EUR", " 1.5  USD ", "1 US", "1 USDX", "1 U$D", "USD 1"} {
		f.Add(s, "USD")
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, s, want string) {
		v, cur, err := parseMoney(s, want)
		if err != nil {
			return
		}
		if cur != "" {
			if c, err := canonCurrency(cur); err != nil || c != cur {
				t.Fatalf("parseMoney(%q) currency %q is not canonical", s, cur)
			}
			if want != "" && cur != want {
				t.Fatalf("parseMoney(%q, %q) accepted currency %q", s, want, cur)
			}
		}
		if v < 0 || v > MaxMinor {
			t.Fatalf("parseMoney(%q) = %d: out of range", s, v)
		}
	})
}

// FuzzMoneyJSON: a money value decodes from any JSON without panicking.
func FuzzMoneyJSON(f *testing.F) {
	for _, s := range []string{`"612.00"`, `612.5`, `"800 USD"`, `-1`, `1e3`, `null`, `"\u0000"`, `true`, `"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m money
		if err := m.UnmarshalJSON(b); err != nil {
			return
		}
		if len(b) > 0 && b[0] != '"' && strings.Trim(string(m), "0123456789.") != "" {
			t.Fatalf("money %s = %q: a number with other characters", b, m)
		}
	})
}

// FuzzGrant: a grant spec never panics the kind or leaks the instrument; a
// granted scope contains itself.
func FuzzGrant(f *testing.F) {
	for _, s := range []string{
		`{"provider":"https://pay.example","instrument":{"env":"PAY_FUZZ_CARD"},"payees":["airline.example"],"currency":"usd"}`,
		`{"provider":"https://pay.example/v1/","instrument":{"env":"PAY_FUZZ_CARD"},"payees":["A.example","b"],"currency":"EUR",
		  "max_amount":"800 EUR","budget":1000.5,"max_uses":3,"expires":"24h","approve_above":"100","timeout":"5s","clearance":["pii:alice"]}`,
		// The same without budget and max_uses (the kernel's, refused above).
		`{"provider":"https://pay.example/v1/","instrument":{"env":"PAY_FUZZ_CARD"},"payees":["A.example","b"],"currency":"EUR",
		  "max_amount":"800 EUR","expires":"24h","approve_above":"100","timeout":"5s","clearance":["pii:alice"]}`,
		`{"provider":"http://127.0.0.1:1","allow_private":true,"instrument":{"env":"PAY_FUZZ_CARD"},"payees":["a"],"currency":"USD","expires":"2026-12-01T00:00:00Z"}`,
		`{"provider":"http://127.0.0.1:1","instrument":{"env":"PAY_FUZZ_CARD"},"payees":["a"],"currency":"USD"}`,
		`{"provider":"https://u:p@pay.example","instrument":{"env":"X"},"payees":[],"currency":"US"}`, `{"provider":1}`, `{}`,
	} {
		f.Add([]byte(s))
	}
	k := fuzzKind()
	gc := fuzzGC
	gc.Dir = f.TempDir()
	f.Fuzz(func(t *testing.T, spec []byte) {
		s, err := k.Grant(gc, spec)
		if err != nil {
			if strings.Contains(err.Error(), fuzzInstrument) {
				t.Fatalf("Grant(%q): the error leaks the instrument: %v", spec, err)
			}
			return
		}
		if !s.Contains(s) {
			t.Fatalf("Grant(%q) = %s, which does not contain itself", spec, s)
		}
		if b, err := s.MarshalJSON(); err != nil || strings.Contains(string(b), fuzzInstrument) {
			t.Fatalf("Grant(%q): MarshalJSON = %s, %v", spec, b, err)
		}
	})
}

// FuzzNarrow: a narrowing request never panics; a success is contained in
// its parent and every ancestor; a failure is EINVAL, ELIMIT or EDENIED.
func FuzzNarrow(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"payees":["airline.example"]}`, `{"payees":["evil.example"]}`, `{"currency":"EUR"}`, `{"currency":"usd"}`,
		`{"max_amount":"50"}`, `{"max_amount":"900"}`, `{"max_amount":"50 EUR"}`, `{"budget":"10.5"}`, `{"budget":99999}`,
		`{"max_uses":1}`, `{"max_uses":-1}`, `{"expires":"1h"}`, `{"expires":"2027-01-01T00:00:00Z"}`, `{"expires":"-1h"}`,
		`{"approve_above":"0"}`, `{"clearance":["pii:alice"]}`, `{"clearance":["pii:bob"]}`, `[`, `{"provider":"x"}`,
	} {
		f.Add(uint8(0), []byte(s))
	}
	k := fuzzKind()
	var parents []kindapi.Scope
	for _, spec := range []string{
		`{"provider":"https://pay.example","instrument":{"env":"PAY_FUZZ_CARD"},"payees":["airline.example","hotel.example"],"currency":"USD",
		  "max_amount":"800","expires":"24h","approve_above":"500","clearance":["pii:alice","financial:alice"]}`,
		`{"provider":"https://pay.example","instrument":{"env":"PAY_FUZZ_CARD"},"payees":["airline.example"],"currency":"EUR"}`,
	} {
		s, err := k.Grant(fuzzGC, []byte(spec))
		if err != nil {
			f.Fatal(err)
		}
		parents = append(parents, s)
	}
	f.Fuzz(func(t *testing.T, which uint8, req []byte) {
		chain := []kindapi.Scope{parents[int(which)%len(parents)]}
		for range 2 {
			cs, ok := kerneltest.CheckNarrow(t, k, chain, req, abi.EINVAL, abi.ELIMIT, abi.EDENIED)
			if !ok {
				return
			}
			if b, _ := cs.MarshalJSON(); strings.Contains(string(b), fuzzInstrument) {
				t.Fatalf("scope JSON leaks the instrument: %s", b)
			}
			chain = append(chain, cs)
		}
	})
}

// FuzzCharge: charge arguments from a guest never panic the kind, never
// leak the instrument, and fail with a documented errno; a charge that
// succeeds (against a loopback provider) is within the scope, and was
// prepared as the kernel must see it: its amount to debit, and a person's
// approval asked exactly when it is above approve_above.
func FuzzCharge(f *testing.F) {
	for _, s := range []string{
		`{"payee":"airline.example","amount":"612.00","currency":"USD","idempotency_key":"k1","description":"test","offer":{"duration_hours":7,"stops":0}}`,
		`{"payee":"Hotel.Example","amount":612.5,"currency":"usd"}`, `{"payee":"airline.example","amount":"900","currency":"USD"}`,
		`{"payee":"airline.example","amount":"600","currency":"USD"}`, `{"payee":"evil.example","amount":"1","currency":"USD"}`,
		`{"payee":"airline.example","amount":"1","currency":"EUR"}`, `{"payee":"airline.example","amount":"0","currency":"USD"}`,
		`{"payee":"airline.example","amount":"1","currency":"USD","idempotency_key":"bad key"}`, `{"payee":"airline.example"}`,
		`{"payee":"airline.example","amount":"1","currency":"USD","offer":[1]}`, `{"amount":"1e3"}`, `[`, ``,
	} {
		f.Add([]byte(s))
	}
	p := paytest.NewProvider()
	f.Cleanup(p.Close)
	p.RequireInstrument(fuzzInstrument)
	k := fuzzKind()
	f.Cleanup(k.CloseIdleConnections)
	spec := []byte(`{"provider":"` + p.URL + `","allow_private":true,"instrument":{"env":"PAY_FUZZ_CARD"},` +
		`"payees":["airline.example","hotel.example"],"currency":"USD","max_amount":"800",` +
		`"expires":"24h","approve_above":"500","timeout":"5s"}`)
	f.Fuzz(func(t *testing.T, args []byte) {
		// A fresh grant each time: its own idempotency keys, so runs are
		// independent.
		s, err := k.Grant(fuzzGC, spec)
		if err != nil {
			t.Fatal(err)
		}
		call := kindtest.NewCall(ChargeOp, args, s, kindapi.TaskInfo{ID: "t1", Principal: "alice"}, hclog.NewNullLogger(), nil)
		check := func(err error) {
			if strings.Contains(err.Error(), fuzzInstrument) {
				t.Fatalf("charge %q: the error leaks the instrument: %v", args, err)
			}
			switch kindapi.ErrnoOf(err) {
			case abi.EINVAL, abi.ELIMIT, abi.EDENIED:
			default:
				t.Fatalf("charge %q: errno %s (%v)", args, kindapi.ErrnoOf(err), err)
			}
		}
		op, err := k.Prepare(call)
		if err != nil {
			check(err)
			return
		}
		if op.Show != nil && strings.Contains(fmt.Sprint(op.Show()), fuzzInstrument) {
			t.Fatalf("charge %q: what the approver is shown leaks the instrument", args)
		}
		// The kernel would ask the person here; the approver says yes. Then
		// its reserve step: the kind claims the idempotency key.
		free := false
		if op.Reserve != nil {
			_, f, err := op.Reserve()
			if err != nil {
				check(err)
				return
			}
			free = f
		}
		res, err := op.Effect(context.Background())
		if err != nil {
			check(err)
			return
		}
		var r Receipt
		if err := json.Unmarshal(res.Data, &r); err != nil {
			t.Fatalf("charge %q: receipt %s: %v", args, res.Data, err)
		}
		amount, err := parseDecimal(r.Amount)
		if err != nil || amount <= 0 || amount > 80000 || r.Currency != "USD" ||
			!slices.Contains([]string{"airline.example", "hotel.example"}, r.Payee) || r.Status == "" {
			t.Fatalf("charge %q: receipt %s is outside the scope", args, res.Data)
		}
		if op.Amount != amount || op.Free || free {
			t.Fatalf("charge %q of %d was prepared as amount %d, free %v (reserved free %v)", args, amount, op.Amount, op.Free, free)
		}
		if (op.NeedsApproval != "") != (amount > 50000) {
			t.Fatalf("charge %q of %d: approval reason %q with approve_above 500.00", args, amount, op.NeedsApproval)
		}
	})
}

// FuzzActivation: whatever the charge arguments, what a constraint sees of
// a prepared charge is built without panicking and is the charge that will
// be made: amount_minor is the amount debited and sent, the payee and
// currency the ones charged.
func FuzzActivation(f *testing.F) {
	for _, s := range []string{
		`{"payee":"airline.example","amount":"612.50","currency":"USD","offer":{"duration_hours":7}}`, `{"amount":612}`,
		`{"amount":612.5}`, `{"amount":"x"}`, `{"amount":92233720368547758}`, `{"amount":922337203685477581}`, `{"amount":-3}`, `{"offer":[1]}`, `[]`, ``, `{"amount":"1 EUR"}`,
		`{"payee":"airline.example","amount":"1.00","Amount":"5000.00","currency":"USD"}`,
		`{"payee":"AIRLINE.example","amount":"1.00","currency":"usd","offer":{"n":1,"n":2}}`,
	} {
		f.Add([]byte(s))
	}
	k := fuzzKind()
	s, err := k.Grant(fuzzGC, []byte(`{"provider":"https://pay.example","instrument":{"env":"PAY_FUZZ_CARD"},"payees":["airline.example"],"currency":"USD"}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		op, err := k.Prepare(kindtest.NewCall(ChargeOp, args, s, kindapi.TaskInfo{}, hclog.NewNullLogger(), nil))
		if err != nil {
			return
		}
		if op.Vars == nil {
			t.Fatalf("Prepare(%q): no Vars", args)
		}
		act, err := op.Vars()
		if err != nil {
			return // an offer a constraint cannot judge: denied
		}
		if _, ok := act["offer"].(map[string]any); !ok {
			t.Fatalf("Vars(%q): offer is %T", args, act["offer"])
		}
		charge, ok := act["charge"].(map[string]any)
		if !ok {
			t.Fatalf("Vars(%q): charge is %T", args, act["charge"])
		}
		minor, ok := charge["amount_minor"].(int64)
		if !ok || minor != op.Amount || minor <= 0 {
			t.Fatalf("Vars(%q): amount_minor %v, but the charge debits %d", args, charge["amount_minor"], op.Amount)
		}
		if major, _ := charge["amount"].(float64); major != float64(minor)/100 {
			t.Fatalf("Vars(%q): amount %v but amount_minor %d", args, charge["amount"], minor)
		}
		if charge["payee"] != "airline.example" || charge["currency"] != "USD" {
			t.Fatalf("Vars(%q): payee %v currency %v, not what is charged", args, charge["payee"], charge["currency"])
		}
	})
}
