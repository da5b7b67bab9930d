package pay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/caps/pay"
	"github.com/mandatevm/mandate/caps/pay/paytest"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel"
)

const (
	testInstrument = "tok_visa_4242_SECRET_z8Qm"
	testEnv        = "PAY_TEST_CARD"
)

var testGC = kernel.GrantContext{LookupEnv: func(name string) (string, bool) {
	if name == testEnv {
		return testInstrument, true
	}
	return "", false
}}

type env struct {
	k     *pay.Kind
	p     *paytest.Provider
	clk   *paytest.Clock
	scope kernel.Scope
}

// newEnv grants a pay capability on a fresh provider. extra is appended to
// the spec's JSON object (",\"budget\":\"100\"").
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

func (e *env) grant(t *testing.T, extra string) kernel.Scope {
	t.Helper()
	s, err := e.k.Grant(testGC, []byte(e.spec(extra)))
	if err != nil {
		t.Fatalf("grant %s: %v", extra, err)
	}
	return s
}

func (e *env) narrow(t *testing.T, parent kernel.Scope, req string) kernel.Scope {
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

type approver func(ctx context.Context, summary string, details map[string]any) error

func (e *env) charge(s kernel.Scope, args string, ap approver) ([]byte, error) {
	call := kernel.NewCall(pay.ChargeOp, []byte(args), s, kernel.TaskInfo{ID: "t1", Principal: "alice"}, hclog.NewNullLogger(), nil)
	if ap != nil {
		call.WithApprover(ap)
	}
	res, err := e.k.Invoke(context.Background(), call)
	if err != nil {
		return nil, err
	}
	return res.Data, nil
}

func chargeArgs(payee, amount, key string) string {
	return fmt.Sprintf(`{"payee":%q,"amount":%q,"currency":"USD","idempotency_key":%q,"description":"test","offer":{"duration_hours":7,"stops":0}}`, payee, amount, key)
}

func wantErrno(t *testing.T, what string, err error, want abi.Errno) {
	t.Helper()
	if got := kernel.ErrnoOf(err); got != want {
		t.Errorf("%s: errno %s (%v), want %s", what, got, err, want)
	}
	if err != nil && strings.Contains(err.Error(), testInstrument) {
		t.Errorf("%s: the error contains the instrument", what)
	}
}

func spent(s kernel.Scope) (int64, int64) { return s.(*pay.Scope).Spent() }

func TestChargeOK(t *testing.T) {
	e := newEnv(t, "")
	out, err := e.charge(e.scope, chargeArgs("Airline.Example", "612.00", "k1"), nil)
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
	if a, u := spent(e.scope); a != 61200 || u != 1 {
		t.Errorf("spent %d, %d uses", a, u)
	}
	// Amount as a JSON number, and without a key (one is generated).
	if _, err := e.charge(e.scope, `{"payee":"hotel.example","amount":12.5,"currency":"USD"}`, nil); err != nil {
		t.Fatal(err)
	}
	if cs := e.p.Charges(); len(cs) != 2 || cs[1].AmountMinor != 1250 || !strings.Contains(cs[1].IdempotencyKey, "-auto-") {
		t.Errorf("second charge %+v", cs)
	}
}

func TestChargeChecks(t *testing.T) {
	e := newEnv(t, `,"budget":"1000","max_uses":5`)
	for _, tc := range []struct {
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
	} {
		_, err := e.charge(e.scope, tc.args, nil)
		wantErrno(t, tc.name, err, tc.want)
	}
	if n := e.p.Requests(); n != 0 {
		t.Errorf("the provider received %d requests; every charge was refused", n)
	}
	if a, u := spent(e.scope); a != 0 || u != 0 {
		t.Errorf("refused charges debited %d (%d uses)", a, u)
	}
	// Exactly the maximum is allowed.
	if _, err := e.charge(e.scope, chargeArgs("airline.example", "800", "max"), nil); err != nil {
		t.Errorf("charge of max_amount: %v", err)
	}
}

func TestCheckOrder(t *testing.T) {
	e := newEnv(t, `,"expires":"1h"`)
	e.clk.Add(2 * time.Hour)
	// Decoding first, then expiry before the scope checks.
	_, err := e.charge(e.scope, `{"payee":"evil.example"}`, nil)
	wantErrno(t, "malformed and expired", err, abi.EINVAL)
	_, err = e.charge(e.scope, chargeArgs("evil.example", "9999", "k"), nil)
	wantErrno(t, "expired and outside the scope", err, abi.EEXPIRED)
}

func TestExpiry(t *testing.T) {
	e := newEnv(t, `,"expires":"24h"`)
	if _, err := e.charge(e.scope, chargeArgs("airline.example", "1", "a"), nil); err != nil {
		t.Fatal(err)
	}
	e.clk.Add(24 * time.Hour)
	_, err := e.charge(e.scope, chargeArgs("airline.example", "1", "b"), nil)
	wantErrno(t, "at expiry", err, abi.EEXPIRED)
	// A replay of a key used before expiry is refused too.
	_, err = e.charge(e.scope, chargeArgs("airline.example", "1", "a"), nil)
	wantErrno(t, "replay after expiry", err, abi.EEXPIRED)
	if n := len(e.p.Charges()); n != 1 {
		t.Errorf("provider has %d charges, want 1", n)
	}

	abs := newEnv(t, `,"expires":"2026-11-01T13:00:00Z"`)
	if _, err := abs.charge(abs.scope, chargeArgs("airline.example", "1", "a"), nil); err != nil {
		t.Fatal(err)
	}
	abs.clk.Add(time.Hour)
	_, err = abs.charge(abs.scope, chargeArgs("airline.example", "1", "b"), nil)
	wantErrno(t, "RFC 3339 expiry", err, abi.EEXPIRED)
}

func TestBudgetAndUses(t *testing.T) {
	e := newEnv(t, `,"budget":"100.00 USD","max_uses":3`)
	for i, amt := range []string{"60", "40.00"} {
		if _, err := e.charge(e.scope, chargeArgs("airline.example", amt, fmt.Sprint("k", i)), nil); err != nil {
			t.Fatalf("charge %s: %v", amt, err)
		}
	}
	_, err := e.charge(e.scope, chargeArgs("airline.example", "0.01", "k2"), nil)
	wantErrno(t, "over budget", err, abi.ELIMIT)

	u := newEnv(t, `,"max_uses":2`)
	for i := range 2 {
		if _, err := u.charge(u.scope, chargeArgs("airline.example", "1", fmt.Sprint("k", i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	_, err = u.charge(u.scope, chargeArgs("airline.example", "1", "k9"), nil)
	wantErrno(t, "over max_uses", err, abi.ELIMIT)
	// A replay is not a use.
	if _, err := u.charge(u.scope, chargeArgs("airline.example", "1", "k0"), nil); err != nil {
		t.Errorf("replay after max_uses: %v", err)
	}
	if n := len(u.p.Charges()); n != 2 {
		t.Errorf("provider has %d charges, want 2", n)
	}
}

func TestIdempotencySequential(t *testing.T) {
	e := newEnv(t, `,"budget":"1000"`)
	first, err := e.charge(e.scope, chargeArgs("airline.example", "612.00", "trip-1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.charge(e.scope, chargeArgs("airline.example", "612", "trip-1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(first) != string(again) {
		t.Errorf("replay receipt %s, want %s", again, first)
	}
	// The same key from a derived capability is the same charge.
	child := e.narrow(t, e.scope, `{"budget":"700"}`)
	viaChild, err := e.charge(child, chargeArgs("airline.example", "612", "trip-1"), nil)
	if err != nil || string(viaChild) != string(first) {
		t.Errorf("replay through a child: %s, %v", viaChild, err)
	}
	for _, args := range []string{
		chargeArgs("airline.example", "613.00", "trip-1"),
		chargeArgs("hotel.example", "612.00", "trip-1"),
	} {
		_, err := e.charge(e.scope, args, nil)
		wantErrno(t, "reused key, different charge", err, abi.EDENIED)
	}
	if n := len(e.p.Charges()); n != 1 || e.p.Requests() != 1 {
		t.Errorf("provider: %d charges, %d requests; want 1, 1", n, e.p.Requests())
	}
	if a, u := spent(e.scope); a != 61200 || u != 1 {
		t.Errorf("spent %d (%d uses), want 61200 (1)", a, u)
	}
	// Another grant (another tree) with the same key is another charge.
	other := e.grant(t, "")
	if _, err := e.charge(other, chargeArgs("airline.example", "612", "trip-1"), nil); err != nil {
		t.Fatal(err)
	}
	if n := len(e.p.Charges()); n != 2 {
		t.Errorf("provider: %d charges, want 2 (keys are per capability tree)", n)
	}
}

func TestIdempotencyConcurrent(t *testing.T) {
	e := newEnv(t, `,"budget":"100"`)
	children := make([]kernel.Scope, 8)
	for i := range children {
		children[i] = e.narrow(t, e.scope, `{}`)
	}
	var wg sync.WaitGroup
	receipts := make([][]byte, 40)
	errs := make([]error, 40)
	for i := range receipts {
		wg.Go(func() {
			receipts[i], errs[i] = e.charge(children[i%len(children)], chargeArgs("airline.example", "10", "same"), nil)
		})
	}
	wg.Wait()
	for i := range receipts {
		if errs[i] != nil {
			t.Fatalf("charge %d: %v", i, errs[i])
		}
		if string(receipts[i]) != string(receipts[0]) {
			t.Errorf("receipt %d differs: %s vs %s", i, receipts[i], receipts[0])
		}
	}
	if n := len(e.p.Charges()); n != 1 || e.p.Requests() != 1 {
		t.Errorf("provider: %d charges, %d requests; want exactly one", n, e.p.Requests())
	}
	if a, _ := spent(e.scope); a != 1000 {
		t.Errorf("spent %d, want 1000", a)
	}
}

func TestBudgetRaceChildren(t *testing.T) {
	e := newEnv(t, `,"budget":"100.00"`)
	children := make([]kernel.Scope, 10)
	for i := range children {
		children[i] = e.narrow(t, e.scope, `{"budget":"50"}`)
	}
	var ok, limited atomic.Int64
	var wg sync.WaitGroup
	for i, c := range children {
		wg.Go(func() {
			_, err := e.charge(c, chargeArgs("airline.example", "15.00", fmt.Sprint("c", i)), nil)
			switch kernel.ErrnoOf(err) {
			case abi.ESUCCESS:
				ok.Add(1)
			case abi.ELIMIT:
				limited.Add(1)
			default:
				t.Errorf("child %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 6 || limited.Load() != 4 {
		t.Errorf("%d charges succeeded, %d hit the budget; want 6 and 4", ok.Load(), limited.Load())
	}
	if total := e.p.Total(); total != 9000 || len(e.p.Charges()) != 6 {
		t.Errorf("provider total %d in %d charges, want 9000 in 6", total, len(e.p.Charges()))
	}
	if a, u := spent(e.scope); a != 9000 || u != 6 {
		t.Errorf("root ledger %d (%d uses)", a, u)
	}
}

func TestBudgetRaceOneCap(t *testing.T) {
	e := newEnv(t, `,"budget":"30.00","max_uses":40`)
	var ok atomic.Int64
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			_, err := e.charge(e.scope, chargeArgs("hotel.example", "1.00", fmt.Sprint("g", i)), nil)
			if err == nil {
				ok.Add(1)
			} else if kernel.ErrnoOf(err) != abi.ELIMIT {
				t.Errorf("goroutine %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 30 || e.p.Total() != 3000 || len(e.p.Charges()) != 30 {
		t.Errorf("%d succeeded, provider total %d in %d charges; want 30, 3000, 30", ok.Load(), e.p.Total(), len(e.p.Charges()))
	}
	// Uses race the same way.
	u := newEnv(t, `,"max_uses":7`)
	ok.Store(0)
	for i := range 50 {
		c := u.narrow(t, u.scope, `{}`)
		wg.Go(func() {
			if _, err := u.charge(c, chargeArgs("hotel.example", "1.00", fmt.Sprint("g", i)), nil); err == nil {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 7 || len(u.p.Charges()) != 7 {
		t.Errorf("%d succeeded, %d at the provider; want 7", ok.Load(), len(u.p.Charges()))
	}
}

func TestProviderFailureReleases(t *testing.T) {
	e := newEnv(t, `,"budget":"10.00","max_uses":1`)
	e.p.FailNext(1)
	_, err := e.charge(e.scope, chargeArgs("airline.example", "10.00", "k1"), nil)
	wantErrno(t, "provider 500", err, abi.EIO)
	if n := len(e.p.Charges()); n != 0 {
		t.Errorf("provider recorded %d charges after failing", n)
	}
	if a, u := spent(e.scope); a != 0 || u != 0 {
		t.Errorf("a failed charge left a debit of %d (%d uses)", a, u)
	}
	// The reservation was released, and the key given up: a retry charges.
	if _, err := e.charge(e.scope, chargeArgs("airline.example", "10.00", "k1"), nil); err != nil {
		t.Fatalf("retry after a failure: %v", err)
	}
	if n := len(e.p.Charges()); n != 1 {
		t.Errorf("provider has %d charges, want 1", n)
	}

	// The provider refusing the instrument is EIO too, and leaves nothing.
	w := newEnv(t, `,"budget":"10.00"`)
	w.p.RequireInstrument("tok_other")
	_, err = w.charge(w.scope, chargeArgs("airline.example", "5", "k"), nil)
	wantErrno(t, "instrument declined", err, abi.EIO)
	if a, _ := spent(w.scope); a != 0 || len(w.p.Charges()) != 0 {
		t.Errorf("declined charge: spent %d, provider %d charges", a, len(w.p.Charges()))
	}
}

func TestProviderTimeout(t *testing.T) {
	e := newEnv(t, `,"budget":"10.00","timeout":"200ms"`)
	e.p.Hang(true)
	start := time.Now()
	_, err := e.charge(e.scope, chargeArgs("airline.example", "10.00", "k1"), nil)
	wantErrno(t, "hanging provider", err, abi.ETIMEDOUT)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("timed out after %v", d)
	}
	if a, _ := spent(e.scope); a != 0 {
		t.Errorf("a timed-out charge left a debit of %d", a)
	}
	e.p.Hang(false)
	if _, err := e.charge(e.scope, chargeArgs("airline.example", "10.00", "k1"), nil); err != nil {
		t.Fatalf("retry after a timeout: %v", err)
	}
	if n := len(e.p.Charges()); n != 1 {
		t.Errorf("provider has %d charges, want 1", n)
	}
}

func TestProviderUnreachable(t *testing.T) {
	e := newEnv(t, `,"budget":"10.00"`)
	e.p.Close()
	_, err := e.charge(e.scope, chargeArgs("airline.example", "1", "k"), nil)
	wantErrno(t, "provider down", err, abi.EIO)
	if a, _ := spent(e.scope); a != 0 {
		t.Errorf("debit %d", a)
	}
}

func TestApproval(t *testing.T) {
	e := newEnv(t, `,"budget":"2000","approve_above":"500"`)
	var asked []string
	var details map[string]any
	yes := func(_ context.Context, summary string, d map[string]any) error {
		asked, details = append(asked, summary), d
		return nil
	}
	no := func(_ context.Context, summary string, _ map[string]any) error {
		asked = append(asked, summary)
		return kernel.Errorf(abi.EAPPROVAL, "approval refused: %s", summary)
	}
	// At or below the threshold nobody is asked.
	if _, err := e.charge(e.scope, chargeArgs("airline.example", "500.00", "a"), no); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 0 {
		t.Fatalf("asked %v for a charge at the threshold", asked)
	}
	_, err := e.charge(e.scope, chargeArgs("airline.example", "612", "b"), no)
	wantErrno(t, "refused", err, abi.EAPPROVAL)
	_, err = e.charge(e.scope, chargeArgs("airline.example", "612", "c"), nil)
	wantErrno(t, "no approver", err, abi.EAPPROVAL)
	if n := len(e.p.Charges()); n != 1 {
		t.Errorf("provider has %d charges after refusals, want 1", n)
	}
	if a, u := spent(e.scope); a != 50000 || u != 1 {
		t.Errorf("refused approvals left a debit: %d (%d uses)", a, u)
	}
	asked = nil
	if _, err := e.charge(e.scope, chargeArgs("airline.example", "612", "b"), yes); err != nil {
		t.Fatalf("approved: %v", err)
	}
	if len(asked) != 1 || asked[0] != "charge 612.00 USD to airline.example" {
		t.Errorf("asked %q", asked)
	}
	if details["amount"] != "612.00" || details["payee"] != "airline.example" || details["offer"].(map[string]any)["stops"] != float64(0) {
		t.Errorf("details %v", details)
	}
	if n := len(e.p.Charges()); n != 2 {
		t.Errorf("provider has %d charges, want 2", n)
	}
	// A child may add a threshold its parent lacks.
	f := newEnv(t, "")
	c := f.narrow(t, f.scope, `{"approve_above":"100"}`)
	_, err = f.charge(c, chargeArgs("airline.example", "100.01", "x"), nil)
	wantErrno(t, "child threshold", err, abi.EAPPROVAL)
}

func TestChildSpendingCountsAgainstParent(t *testing.T) {
	e := newEnv(t, `,"budget":"100"`)
	child := e.narrow(t, e.scope, `{"budget":"80"}`)
	grand := e.narrow(t, child, `{"budget":"50"}`)
	if _, err := e.charge(grand, chargeArgs("airline.example", "50", "a"), nil); err != nil {
		t.Fatal(err)
	}
	_, err := e.charge(grand, chargeArgs("airline.example", "0.01", "b"), nil)
	wantErrno(t, "grandchild budget", err, abi.ELIMIT)
	_, err = e.charge(child, chargeArgs("airline.example", "30.01", "c"), nil)
	wantErrno(t, "child budget after grandchild spent", err, abi.ELIMIT)
	if _, err := e.charge(child, chargeArgs("airline.example", "30", "c"), nil); err != nil {
		t.Fatal(err)
	}
	_, err = e.charge(e.scope, chargeArgs("airline.example", "20.01", "d"), nil)
	wantErrno(t, "root budget after the subtree spent", err, abi.ELIMIT)
	if _, err := e.charge(e.scope, chargeArgs("airline.example", "20", "d"), nil); err != nil {
		t.Fatal(err)
	}
	if e.p.Total() != 10000 {
		t.Errorf("provider total %d", e.p.Total())
	}
	for _, s := range []kernel.Scope{e.scope, child, grand} {
		b, _ := json.Marshal(s)
		if strings.Contains(string(b), testInstrument) || strings.Contains(fmt.Sprintf("%v %+v %#v %s", s, s, s, s), testInstrument) {
			t.Errorf("a scope shows the instrument")
		}
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
	if !errors.Is(kernel.Errorf(abi.EDENIED, "x"), kernel.ErrDenied) {
		t.Fatal("sanity")
	}
}
