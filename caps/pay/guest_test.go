package pay_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/caps/pay"
	"github.com/mandatevm/mandate/caps/pay/paytest"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// TestGuestHostile runs testdata/guests/pay-hostile under the kernel and
// checks each attack's errno and what reached the provider.
func TestGuestHostile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a guest")
	}
	ctx := context.Background()
	wasm, _, err := guestbuild.Build(ctx, filepath.Join("..", "..", "testdata", "guests", "pay-hostile"), guestbuild.Options{})
	if err != nil {
		t.Fatalf("building pay-hostile: %v", err)
	}
	p := paytest.NewProvider()
	defer p.Close()
	p.RequireInstrument(testInstrument)
	clk := paytest.NewClock(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	kind := pay.New(pay.WithClock(clk.Now))
	defer kind.CloseIdleConnections()

	logs := &kerneltest.Buffer{}
	logger := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace})
	eng := testengine.New(t)
	var asked []kernel.ApprovalRequest
	k, err := kernel.New(kernel.Config{Engine: eng, Kinds: []kindapi.Kind{kind}, Logger: logger,
		Approver: kernel.ApproverFunc(func(_ context.Context, r kernel.ApprovalRequest) (bool, error) {
			asked = append(asked, r)
			return false, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	base := `"provider":"` + p.URL + `","allow_private":true,"instrument":{"env":"` + testEnv + `"},` +
		`"payees":["airline.example"],"currency":"USD","max_amount":"800","approve_above":"700"`
	// budget 1000 and max_uses 20 are the kernel's, on the grant.
	grant := func(name, extra string) kernel.GrantSpec {
		s, err := k.Grant("pay", testGC, []byte("{"+base+extra+"}"))
		if err != nil {
			t.Fatalf("grant %s: %v", name, err)
		}
		budget, err := k.ParseBudget("pay", s, "1000")
		if err != nil {
			t.Fatal(err)
		}
		return kernel.GrantSpec{Name: name, Kind: "pay", Scope: s, Allowance: kernel.Allowance{Budget: budget, MaxUses: 20}}
	}
	grants := []kernel.GrantSpec{grant("card", ""), grant("old", `,"expires":"1h"`)}
	clk.Add(2 * time.Hour) // "old" has expired by the time the guest runs

	mod, err := eng.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	task, err := k.Run(ctx, kernel.TaskSpec{Module: mod, Principal: "mallory", Grants: grants, Limits: kernel.Limits{Timeout: time.Minute}})
	if err != nil {
		t.Fatalf("run: %v\nstderr: %s", err, task.Stderr().String())
	}
	raw, ok := task.Result()
	if !ok {
		t.Fatalf("no result; stderr: %s", task.Stderr().String())
	}
	var got map[string]struct{ Errno, Detail string }
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("result %q: %v", raw, err)
	}
	want := map[string][2]string{ // errno, detail ("" = any)
		"ok":                      {"ESUCCESS", ""},
		"replay":                  {"ESUCCESS", "same"},
		"replay_changed_amount":   {"EDENIED", ""},
		"replay_changed_currency": {"EDENIED", ""},
		"overspend_one":           {"EDENIED", ""},
		"payee":                   {"EDENIED", ""},
		"payee_suffix":            {"EDENIED", ""},
		"currency":                {"EDENIED", ""},
		"approval":                {"EAPPROVAL", ""},
		"malformed":               {"EINVAL", ""},
		"set_instrument":          {"EINVAL", ""},
		"widen_budget":            {"EDENIED", ""},
		"widen_payees":            {"EDENIED", ""},
		"widen_max":               {"EDENIED", ""},
		"widen_uses":              {"EDENIED", ""},
		"widen_approval":          {"EDENIED", ""},
		"widen_provider":          {"EINVAL", ""},
		"widen_currency":          {"EDENIED", ""},
		"child_derive":            {"ESUCCESS", ""},
		"child_ok":                {"ESUCCESS", ""},
		"child_overspend":         {"ELIMIT", ""},
		"child_replay":            {"ESUCCESS", "same"},
		"many_small":              {"ELIMIT", "8"}, // 1000 - 100 - 40 leaves room for 8
		"expired":                 {"EEXPIRED", ""},
		"describe":                {"ESUCCESS", ""},
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s: no result", name)
			continue
		}
		if g.Errno != w[0] || (w[1] != "" && g.Detail != w[1]) {
			t.Errorf("%s: %s %q, want %s %q", name, g.Errno, g.Detail, w[0], w[1])
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected result %s", name)
		}
	}

	// The provider saw exactly the allowed charges: 100 (once, despite
	// the replays), the child's 40, and eight of 100.
	cs := p.Charges()
	var total int64
	for _, c := range cs {
		total += c.AmountMinor
		if c.Payee != "airline.example" || c.Currency != "USD" || c.AmountMinor > 80000 || c.Instrument != testInstrument {
			t.Errorf("provider charge outside the grant: %+v", c)
		}
	}
	if len(cs) != 10 || total != 94000 {
		t.Errorf("provider has %d charges totalling %d, want 10 totalling 94000: %+v", len(cs), total, cs)
	}
	if p.Requests() != 10 {
		t.Errorf("provider received %d requests, want 10 (refused charges never reach it)", p.Requests())
	}
	if len(asked) != 1 || asked[0].Summary != "charge 750.00 USD to airline.example" || asked[0].Kind != "pay" || asked[0].Principal != "mallory" {
		t.Errorf("approvals asked: %+v", asked)
	}
	if d := got["describe"].Detail; !strings.Contains(d, `"instrument":"env:`+testEnv+`"`) {
		t.Errorf("describe: %s", d)
	}

	// The instrument never reached the guest, the logs or the graph.
	g, _ := json.Marshal(k.Graph())
	for what, s := range map[string]string{
		"result": string(raw), "stdout": task.Stdout().String(), "stderr": task.Stderr().String(),
		"last_error": task.LastError(), "logs": logs.String(), "graph": string(g),
	} {
		if strings.Contains(s, testInstrument) {
			t.Errorf("the instrument appears in the %s", what)
		}
	}
	if t.Failed() {
		t.Logf("guest stdout:\n%s", task.Stdout().String())
	}
}
