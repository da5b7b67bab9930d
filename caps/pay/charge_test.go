package pay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/caps/pay"
	"github.com/mandatevm/mandate/caps/pay/paytest"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/kernel/kindapi/kindtest"
)

const (
	testInstrument = "tok_visa_4242_SECRET_z8Qm"
	testEnv        = "PAY_TEST_CARD"
)

var testGC = kindapi.GrantContext{LookupEnv: func(name string) (string, bool) {
	if name == testEnv {
		return testInstrument, true
	}
	return "", false
}}

type env struct {
	k     *pay.Kind
	p     *paytest.Provider
	clk   *paytest.Clock
	scope kindapi.Scope
}

// newEnv grants a pay capability on a fresh provider. extra is appended to
// the spec's JSON object (",\"approve_above\":\"100\"").
func newEnv(t *testing.T, extra string) *env {
	t.Helper()
	p := paytest.NewProvider()
	t.Cleanup(p.Close)
	p.RequireInstrument(testInstrument)
	clk := paytest.NewClock(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	k := pay.New(pay.WithClock(clk.Now))
	t.Cleanup(k.CloseIdleConnections)
	e := &env{k: k, p: p, clk: clk}
	e.scope = e.grant(t, extra)
	return e
}

func (e *env) spec(extra string) string {
	return `{"provider":"` + e.p.URL + `","allow_private":true,"instrument":{"env":"` + testEnv + `"},` +
		`"payees":["airline.example","Hotel.Example"],"currency":"usd","max_amount":"800 USD"` + extra + `}`
}

func (e *env) grant(t *testing.T, extra string) kindapi.Scope {
	t.Helper()
	s, err := e.k.Grant(testGC, []byte(e.spec(extra)))
	if err != nil {
		t.Fatalf("grant %s: %v", extra, err)
	}
	return s
}

func (e *env) narrow(t *testing.T, parent kindapi.Scope, req string) kindapi.Scope {
	t.Helper()
	s, err := e.k.Narrow(parent, []byte(req))
	if err != nil {
		t.Fatalf("narrow %s: %v", req, err)
	}
	if !parent.Contains(s) {
		t.Fatalf("narrow %s: parent does not contain the child", req)
	}
	return s
}

func (e *env) call(s kindapi.Scope, args string) *kindapi.Call {
	return kindtest.NewCall(pay.ChargeOp, []byte(args), s, kindapi.TaskInfo{ID: "t1", Principal: "alice"}, hclog.NewNullLogger(), nil)
}

// charge prepares a charge on the kind and runs it, with none of the
// kernel's checks between (no approval, no uses or budget: those are the
// kernel's, tested in kernel_test.go).
func (e *env) charge(s kindapi.Scope, args string) ([]byte, error) {
	op, err := e.k.Prepare(e.call(s, args))
	if err != nil {
		return nil, err
	}
	res, err := kerneltest.Run(context.Background(), op)
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, errors.New("a prepared charge returned no receipt")
	}
	return res.Data, nil
}

// prepare prepares a charge without running it.
func (e *env) prepare(t *testing.T, s kindapi.Scope, args string) kindapi.Op {
	t.Helper()
	op, err := e.k.Prepare(e.call(s, args))
	if err != nil {
		t.Fatalf("prepare %s: %v", args, err)
	}
	return op
}

func chargeArgs(payee, amount, key string) string {
	return fmt.Sprintf(`{"payee":%q,"amount":%q,"currency":"USD","idempotency_key":%q,"description":"test","offer":{"duration_hours":7,"stops":0}}`, payee, amount, key)
}

func wantErrno(t *testing.T, what string, err error, want abi.Errno) {
	t.Helper()
	if got := kindapi.ErrnoOf(err); got != want {
		t.Errorf("%s: errno %s (%v), want %s", what, got, err, want)
	}
	if err != nil && strings.Contains(err.Error(), testInstrument) {
		t.Errorf("%s: the error contains the instrument", what)
	}
}

func TestChargeOK(t *testing.T) {
	e := newEnv(t, "")
	// What the kernel decides on: the amount debited from every budget on
	// the chain, where the charge sends data, and no approval needed.
	op := e.prepare(t, e.scope, chargeArgs("Airline.Example", "612.00", "k1"))
	if op.Amount != 61200 || op.Free || op.NeedsApproval != "" || op.Sink == nil || op.Effect == nil {
		t.Errorf("prepared charge: amount %d free %v approval %q sink %v", op.Amount, op.Free, op.NeedsApproval, op.Sink)
	}
	if n := e.p.Requests(); n != 0 {
		t.Errorf("preparing a charge sent %d requests to the provider", n)
	}
	out, err := e.charge(e.scope, chargeArgs("Airline.Example", "612.00", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	var r pay.Receipt
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	want := pay.Receipt{ChargeID: "ch_1", Amount: "612.00", Currency: "USD", Payee: "airline.example", IdempotencyKey: "k1", Status: "succeeded"}
	if r != want {
		t.Errorf("receipt %+v, want %+v", r, want)
	}
	cs := e.p.Charges()
	if len(cs) != 1 {
		t.Fatalf("provider has %d charges", len(cs))
	}
	c := cs[0]
	if c.AmountMinor != 61200 || c.Currency != "USD" || c.Payee != "airline.example" || c.Instrument != testInstrument ||
		!strings.HasSuffix(c.IdempotencyKey, "-k1") || c.Description != "test" {
		t.Errorf("provider saw %+v", c)
	}
	var d map[string]any
	if err := json.Unmarshal(c.Details, &d); err != nil || d["stops"] != float64(0) {
		t.Errorf("details %s", c.Details)
	}
	if strings.Contains(string(out), testInstrument) {
		t.Error("the receipt contains the instrument")
	}
	// Amount as a JSON number, and without a key (one is generated).
	if op := e.prepare(t, e.scope, `{"payee":"hotel.example","amount":12.5,"currency":"USD"}`); op.Amount != 1250 || op.Free {
		t.Errorf("prepared a 12.5 charge as amount %d free %v", op.Amount, op.Free)
	}
	if _, err := e.charge(e.scope, `{"payee":"hotel.example","amount":12.5,"currency":"USD"}`); err != nil {
		t.Fatal(err)
	}
	if cs := e.p.Charges(); len(cs) != 2 || cs[1].AmountMinor != 1250 || !strings.Contains(cs[1].IdempotencyKey, "-auto-") {
		t.Errorf("second charge %+v", cs)
	}
}

// chargeRefusals are charges the kind refuses before anything is sent.
// TestChargeChecks runs them on the kind, TestKernelRefusedChargesDoNotDebit
// through a kernel.
var chargeRefusals = []struct {
	name, args string
	want       abi.Errno
}{
	{"not json", `{`, abi.EINVAL},
	{"unknown field", `{"payee":"airline.example","amount":"1","currency":"USD","to":"x"}`, abi.EINVAL},
	{"trailing", chargeArgs("airline.example", "1", "a") + `{}`, abi.EINVAL},
	{"no payee", `{"amount":"1","currency":"USD"}`, abi.EINVAL},
	{"no amount", `{"payee":"airline.example","currency":"USD"}`, abi.EINVAL},
	{"no currency", `{"payee":"airline.example","amount":"1"}`, abi.EINVAL},
	{"negative", chargeArgs("airline.example", "-1.00", "a"), abi.EINVAL},
	{"zero", chargeArgs("airline.example", "0.00", "a"), abi.EINVAL},
	{"three decimals", chargeArgs("airline.example", "1.001", "a"), abi.EINVAL},
	{"NaN", chargeArgs("airline.example", "NaN", "a"), abi.EINVAL},
	{"Inf", chargeArgs("airline.example", "Inf", "a"), abi.EINVAL},
	{"exponent", `{"payee":"airline.example","amount":1e3,"currency":"USD"}`, abi.EINVAL},
	{"negative number", `{"payee":"airline.example","amount":-5,"currency":"USD"}`, abi.EINVAL},
	{"spaces", chargeArgs("airline.example", " 1.00", "a"), abi.EINVAL},
	{"huge", chargeArgs("airline.example", "99999999999999999999999", "a"), abi.EINVAL},
	{"bad payee", chargeArgs("airline.example/x", "1", "a"), abi.EINVAL},
	{"bad key", chargeArgs("airline.example", "1", "a b"), abi.EINVAL},
	{"offer not object", `{"payee":"airline.example","amount":"1","currency":"USD","offer":[1]}`, abi.EINVAL},
	{"offer too big", `{"payee":"airline.example","amount":"1","currency":"USD","offer":{"x":"` + strings.Repeat("a", pay.MaxOfferBytes) + `"}}`, abi.ELIMIT},
	{"bad currency", `{"payee":"airline.example","amount":"1","currency":"US"}`, abi.EINVAL},
	{"payee not allowed", chargeArgs("evil.example", "1.00", "a"), abi.EDENIED},
	{"payee suffix", chargeArgs("airline.example.evil", "1.00", "a"), abi.EDENIED},
	{"currency", `{"payee":"airline.example","amount":"1","currency":"EUR"}`, abi.EDENIED},
	{"over max", chargeArgs("airline.example", "800.01", "a"), abi.EDENIED},
}

func TestChargeChecks(t *testing.T) {
	e := newEnv(t, "")
	for _, tc := range chargeRefusals {
		// Refused by Prepare itself: no effect for the kernel to run.
		_, err := e.k.Prepare(e.call(e.scope, tc.args))
		wantErrno(t, tc.name, err, tc.want)
	}
	if n := e.p.Requests(); n != 0 {
		t.Errorf("the provider received %d requests; every charge was refused", n)
	}
	// Exactly the maximum is allowed.
	if _, err := e.charge(e.scope, chargeArgs("airline.example", "800", "max")); err != nil {
		t.Errorf("charge of max_amount: %v", err)
	}
}

func TestCheckOrder(t *testing.T) {
	e := newEnv(t, `,"expires":"1h"`)
	e.clk.Add(2 * time.Hour)
	// Decoding first, then expiry before the scope checks.
	_, err := e.charge(e.scope, `{"payee":"evil.example"}`)
	wantErrno(t, "malformed and expired", err, abi.EINVAL)
	_, err = e.charge(e.scope, chargeArgs("evil.example", "9999", "k"))
	wantErrno(t, "expired and outside the scope", err, abi.EEXPIRED)
}

func TestExpiry(t *testing.T) {
	e := newEnv(t, `,"expires":"24h"`)
	if _, err := e.charge(e.scope, chargeArgs("airline.example", "1", "a")); err != nil {
		t.Fatal(err)
	}
	e.clk.Add(24 * time.Hour)
	_, err := e.charge(e.scope, chargeArgs("airline.example", "1", "b"))
	wantErrno(t, "at expiry", err, abi.EEXPIRED)
	// A replay of a key used before expiry is refused too.
	_, err = e.charge(e.scope, chargeArgs("airline.example", "1", "a"))
	wantErrno(t, "replay after expiry", err, abi.EEXPIRED)
	if n := len(e.p.Charges()); n != 1 {
		t.Errorf("provider has %d charges, want 1", n)
	}

	abs := newEnv(t, `,"expires":"2026-11-01T13:00:00Z"`)
	if _, err := abs.charge(abs.scope, chargeArgs("airline.example", "1", "a")); err != nil {
		t.Fatal(err)
	}
	abs.clk.Add(time.Hour)
	_, err = abs.charge(abs.scope, chargeArgs("airline.example", "1", "b"))
	wantErrno(t, "RFC 3339 expiry", err, abi.EEXPIRED)
}

func TestIdempotencySequential(t *testing.T) {
	e := newEnv(t, "")
	if op := e.prepare(t, e.scope, chargeArgs("airline.example", "612.00", "trip-1")); op.Free || op.Amount != 61200 {
		t.Errorf("a first charge prepared as free %v amount %d", op.Free, op.Amount)
	}
	first, err := e.charge(e.scope, chargeArgs("airline.example", "612.00", "trip-1"))
	if err != nil {
		t.Fatal(err)
	}
	// A replay of a completed charge is free: no use, no budget.
	if op := e.prepare(t, e.scope, chargeArgs("airline.example", "612", "trip-1")); !op.Free || op.Amount != 0 || op.NeedsApproval != "" {
		t.Errorf("a replay prepared as free %v amount %d approval %q", op.Free, op.Amount, op.NeedsApproval)
	}
	again, err := e.charge(e.scope, chargeArgs("airline.example", "612", "trip-1"))
	if err != nil {
		t.Fatal(err)
	}
	if string(first) != string(again) {
		t.Errorf("replay receipt %s, want %s", again, first)
	}
	// The same key from a derived capability is the same charge.
	child := e.narrow(t, e.scope, `{"max_amount":"700"}`)
	if op := e.prepare(t, child, chargeArgs("airline.example", "612", "trip-1")); !op.Free {
		t.Errorf("a replay through a child is not free")
	}
	viaChild, err := e.charge(child, chargeArgs("airline.example", "612", "trip-1"))
	if err != nil || string(viaChild) != string(first) {
		t.Errorf("replay through a child: %s, %v", viaChild, err)
	}
	for _, args := range []string{
		chargeArgs("airline.example", "613.00", "trip-1"),
		chargeArgs("hotel.example", "612.00", "trip-1"),
	} {
		// Not a replay, and never a free one: refused.
		_, err := e.k.Prepare(e.call(e.scope, args))
		wantErrno(t, "reused key, different charge", err, abi.EDENIED)
	}
	if n := len(e.p.Charges()); n != 1 || e.p.Requests() != 1 {
		t.Errorf("provider: %d charges, %d requests; want 1, 1", n, e.p.Requests())
	}
	// Another grant (another tree) with the same key is another charge.
	other := e.grant(t, "")
	if op := e.prepare(t, other, chargeArgs("airline.example", "612", "trip-1")); op.Free {
		t.Errorf("a key of another tree is prepared as a replay")
	}
	if _, err := e.charge(other, chargeArgs("airline.example", "612", "trip-1")); err != nil {
		t.Fatal(err)
	}
	if n := len(e.p.Charges()); n != 2 {
		t.Errorf("provider: %d charges, want 2 (keys are per capability tree)", n)
	}
}

func TestProviderFailure(t *testing.T) {
	e := newEnv(t, "")
	e.p.FailNext(1)
	_, err := e.charge(e.scope, chargeArgs("airline.example", "10.00", "k1"))
	wantErrno(t, "provider 500", err, abi.EIO)
	if n := len(e.p.Charges()); n != 0 {
		t.Errorf("provider recorded %d charges after failing", n)
	}
	// The key was given up: a retry charges (and is not a replay).
	if op := e.prepare(t, e.scope, chargeArgs("airline.example", "10.00", "k1")); op.Free {
		t.Errorf("the retry of a failed charge is prepared as a replay")
	}
	if _, err := e.charge(e.scope, chargeArgs("airline.example", "10.00", "k1")); err != nil {
		t.Fatalf("retry after a failure: %v", err)
	}
	if n := len(e.p.Charges()); n != 1 {
		t.Errorf("provider has %d charges, want 1", n)
	}

	// The provider refusing the instrument is EIO too, and leaves nothing.
	w := newEnv(t, "")
	w.p.RequireInstrument("tok_other")
	_, err = w.charge(w.scope, chargeArgs("airline.example", "5", "k"))
	wantErrno(t, "instrument declined", err, abi.EIO)
	if len(w.p.Charges()) != 0 {
		t.Errorf("declined charge: provider %d charges", len(w.p.Charges()))
	}
}

func TestProviderTimeout(t *testing.T) {
	e := newEnv(t, `,"timeout":"200ms"`)
	e.p.Hang(true)
	start := time.Now()
	_, err := e.charge(e.scope, chargeArgs("airline.example", "10.00", "k1"))
	wantErrno(t, "hanging provider", err, abi.ETIMEDOUT)
	// Not a bound on the machine's speed: the default timeout would have
	// ended it only after pay.DefaultTimeout.
	if d := time.Since(start); d >= pay.DefaultTimeout {
		t.Errorf("timed out after %v: the default timeout, not the grant's 200ms", d)
	}
	e.p.Hang(false)
	if _, err := e.charge(e.scope, chargeArgs("airline.example", "10.00", "k1")); err != nil {
		t.Fatalf("retry after a timeout: %v", err)
	}
	if n := len(e.p.Charges()); n != 1 {
		t.Errorf("provider has %d charges, want 1", n)
	}
}

func TestProviderUnreachable(t *testing.T) {
	e := newEnv(t, "")
	e.p.Close()
	_, err := e.charge(e.scope, chargeArgs("airline.example", "1", "k"))
	wantErrno(t, "provider down", err, abi.EIO)
}

// TestApprovalNeeded: above approve_above the kind asks the kernel for a
// person's yes, showing the charge as it will be made; at or below it,
// nobody is asked. (The kernel asking its approver, and a no stopping the
// charge, is TestKernelApproval.)
func TestApprovalNeeded(t *testing.T) {
	e := newEnv(t, `,"approve_above":"500"`)
	if op := e.prepare(t, e.scope, chargeArgs("airline.example", "500.00", "a")); op.NeedsApproval != "" {
		t.Errorf("a charge at the threshold needs approval: %q", op.NeedsApproval)
	}
	op := e.prepare(t, e.scope, chargeArgs("airline.example", "612", "b"))
	if !strings.Contains(op.NeedsApproval, "approve_above 500.00 USD") {
		t.Errorf("a charge above the threshold: approval reason %q", op.NeedsApproval)
	}
	if op.Show == nil {
		t.Fatal("a charge that needs approval shows nothing")
	}
	shown := op.Show()
	if shown.Summary != "charge 612.00 USD to airline.example" {
		t.Errorf("summary %q", shown.Summary)
	}
	details := map[string]string{}
	for _, d := range shown.Details {
		details[d.Name] = d.Value
	}
	if details["amount"] != "612.00" || details["payee"] != "airline.example" || details["currency"] != "USD" ||
		details["idempotency_key"] != "b" || !strings.Contains(details["offer"], `"stops":0`) {
		t.Errorf("details %v", details)
	}
	if strings.Contains(fmt.Sprint(shown), testInstrument) {
		t.Errorf("the approver would be shown the instrument: %v", shown)
	}
	if n := e.p.Requests(); n != 0 {
		t.Errorf("preparing sent %d requests", n)
	}
	// A child may add a threshold its parent lacks.
	f := newEnv(t, "")
	if op := f.prepare(t, f.scope, chargeArgs("airline.example", "100.01", "x")); op.NeedsApproval != "" {
		t.Errorf("no threshold, yet approval needed: %q", op.NeedsApproval)
	}
	c := f.narrow(t, f.scope, `{"approve_above":"100"}`)
	if op := f.prepare(t, c, chargeArgs("airline.example", "100.01", "x")); op.NeedsApproval == "" {
		t.Error("the child's threshold asks nobody")
	}
}

func TestInstrumentNotInErrors(t *testing.T) {
	e := newEnv(t, "")
	s, _ := json.Marshal(e.scope)
	if !strings.Contains(string(s), `"instrument":"env:`+testEnv+`"`) {
		t.Errorf("scope JSON %s does not name the instrument's source", s)
	}
	if strings.Contains(string(s), testInstrument) {
		t.Errorf("scope JSON shows the instrument")
	}
	if !errors.Is(kindapi.Errorf(abi.EDENIED, "x"), kindapi.ErrDenied) {
		t.Fatal("sanity")
	}
}

// TestSeededKeys: a grant made with the run's seed (a fleet retrying a run
// after its node was lost) sends the provider the same idempotency keys as
// the attempt before it, auto keys included, so a repeated charge is the
// first one replayed; another grant name or seed is another tree; and only
// a seeded grant describes itself as repeatable.
func TestSeededKeys(t *testing.T) {
	e := newEnv(t, "")
	seeded := func(seed, name string) kindapi.Scope {
		g := testGC
		g.Seed, g.Name = seed, name
		s, err := e.k.Grant(g, []byte(e.spec("")))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	noKey := `{"payee":"airline.example","amount":"612.00","currency":"USD"}`
	var receipts []string
	for attempt := range 2 {
		s := seeded("sub-1", "card")
		if d := e.k.Describe(s); !d.Repeatable {
			t.Fatalf("a seeded grant is not repeatable: %q", d.NotRepeatable)
		}
		for _, args := range []string{noKey, chargeArgs("airline.example", "10.00", "k1"), noKey} {
			r, err := e.charge(s, args)
			if err != nil {
				t.Fatalf("attempt %d: %v", attempt, err)
			}
			receipts = append(receipts, string(r))
		}
	}
	if n := len(e.p.Charges()); n != 3 {
		t.Fatalf("two attempts of three charges made %d provider charges, want 3: %+v", n, e.p.Charges())
	}
	for i := range 3 {
		if receipts[i] != receipts[i+3] {
			t.Errorf("charge %d: attempt 2 got %s, attempt 1 %s", i, receipts[i+3], receipts[i])
		}
	}
	for _, s := range []kindapi.Scope{seeded("sub-1", "other"), seeded("sub-2", "card")} {
		if _, err := e.charge(s, noKey); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(e.p.Charges()); n != 5 {
		t.Errorf("other names and seeds made %d charges in all, want 5", n)
	}
	if d := e.k.Describe(e.scope); d.Repeatable || d.NotRepeatable == "" {
		t.Errorf("an unseeded grant: repeatable %v (%q)", d.Repeatable, d.NotRepeatable)
	}
}
