package pay_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/caps/pay"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

func TestGrantErrors(t *testing.T) {
	e := newEnv(t, "")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "card"), []byte(testInstrument+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := `"provider":"` + e.p.URL + `","allow_private":true`
	inst := `"instrument":{"env":"` + testEnv + `"}`
	base := p + `,` + inst + `,"payees":["a.example"],"currency":"USD"`
	for _, tc := range []struct{ spec, field string }{
		{`{` + inst + `,"payees":["a"],"currency":"USD"}`, "provider"},
		{`{"provider":"ftp://x",` + inst + `,"payees":["a"],"currency":"USD"}`, "provider"},
		{`{"provider":"http://u:p@pay.example",` + inst + `,"payees":["a"],"currency":"USD"}`, "provider"},
		{`{"provider":"http://127.0.0.1:9",` + inst + `,"payees":["a"],"currency":"USD"}`, "provider"},
		{`{"provider":"http://localhost:9",` + inst + `,"payees":["a"],"currency":"USD"}`, "provider"},
		{`{` + p + `,"payees":["a"],"currency":"USD"}`, "instrument"},
		{`{` + p + `,"instrument":{"env":"NOPE"},"payees":["a"],"currency":"USD"}`, "instrument.env"},
		{`{` + p + `,"instrument":{"file":"missing"},"payees":["a"],"currency":"USD"}`, "instrument.file"},
		{`{` + p + `,"instrument":{"env":"X","file":"y"},"payees":["a"],"currency":"USD"}`, "instrument"},
		{`{` + p + `,"instrument":{},"payees":["a"],"currency":"USD"}`, "instrument"},
		{`{` + p + `,` + inst + `,"currency":"USD"}`, "payees"},
		{`{` + p + `,` + inst + `,"payees":[],"currency":"USD"}`, "payees"},
		{`{` + p + `,` + inst + `,"payees":["a b"],"currency":"USD"}`, "payees"},
		{`{` + p + `,` + inst + `,"payees":["a"]}`, "currency"},
		{`{` + p + `,` + inst + `,"payees":["a"],"currency":"DOLLARS"}`, "currency"},
		{`{` + base + `,"max_amount":"800 EUR"}`, "max_amount"},
		{`{` + base + `,"max_amount":"800.001"}`, "max_amount"},
		{`{` + base + `,"max_amount":"-1"}`, "max_amount"},
		{`{` + base + `,"max_amount":"NaN"}`, "max_amount"},
		{`{` + base + `,"max_amount":-5}`, "max_amount"},
		{`{` + base + `,"max_amount":true}`, "max_amount"},
		// Budgets and uses are the kernel's (GrantSpec.Allowance): a pay
		// spec carrying them is refused, not silently unbounded.
		{`{` + base + `,"budget":"1000"}`, "budget"},
		{`{` + base + `,"approve_above":"x"}`, "approve_above"},
		{`{` + base + `,"max_uses":3}`, "max_uses"},
		{`{` + base + `,"expires":"tomorrow"}`, "expires"},
		{`{` + base + `,"expires":"-1h"}`, "expires"},
		{`{` + base + `,"timeout":"1h"}`, "timeout"},
		{`{` + base + `,"bogus":1}`, "bogus"},
	} {
		_, err := e.k.Grant(kindapi.GrantContext{Dir: dir, LookupEnv: testGC.LookupEnv}, []byte(tc.spec))
		var fe *kindapi.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("grant %s: %v, want a FieldError on %s", tc.spec, err, tc.field)
		} else if strings.Contains(err.Error(), testInstrument) {
			t.Errorf("grant error shows the instrument: %v", err)
		}
	}
	// From a file, relative to the manifest; values parsed.
	s, err := e.k.Grant(kindapi.GrantContext{Dir: dir}, []byte(`{`+p+`,"instrument":{"file":"card"},"payees":["B.example","a.example","b.example"],"currency":"eur",`+
		`"max_amount":"800.5 EUR","approve_above":"500.00","expires":"2030-01-02T03:04:05Z"}`))
	if err != nil {
		t.Fatal(err)
	}
	ps := s.(*pay.Scope)
	if fmt.Sprint(ps.Payees()) != "[a.example b.example]" || ps.Currency() != "EUR" || ps.MaxAmount() != 80050 ||
		ps.ApproveAbove() != 50000 || ps.Expires().Year() != 2030 {
		t.Errorf("scope %s", ps)
	}
}

// TestNarrowRequests: what the kind narrows. budget and max_uses are the
// kernel's, taken off a cap_derive request before the kind sees it
// (TestKernelNarrowAllowance); the kind refuses them as unknown fields.
func TestNarrowRequests(t *testing.T) {
	e := newEnv(t, `,"expires":"48h","approve_above":"500"`)
	for _, tc := range []struct {
		req  string
		want abi.Errno
	}{
		{`{}`, abi.ESUCCESS},
		{`{"payees":["airline.example"]}`, abi.ESUCCESS},
		{`{"payees":["AIRLINE.example"]}`, abi.ESUCCESS},
		{`{"payees":["evil.example"]}`, abi.EDENIED},
		{`{"payees":["airline.example","evil.example"]}`, abi.EDENIED},
		{`{"payees":[]}`, abi.EINVAL},
		{`{"currency":"usd"}`, abi.ESUCCESS},
		{`{"currency":"EUR"}`, abi.EDENIED},
		{`{"max_amount":"800.00"}`, abi.ESUCCESS},
		{`{"max_amount":"800.01"}`, abi.EDENIED},
		{`{"max_amount":"100 EUR"}`, abi.EDENIED},
		{`{"max_amount":"1.234"}`, abi.EINVAL},
		{`{"budget":"1000"}`, abi.EINVAL},
		{`{"max_uses":10}`, abi.EINVAL},
		{`{"expires":"1h"}`, abi.ESUCCESS},
		{`{"expires":"49h"}`, abi.EDENIED},
		{`{"expires":"2099-01-01T00:00:00Z"}`, abi.EDENIED},
		{`{"expires":"soon"}`, abi.EINVAL},
		{`{"approve_above":"100"}`, abi.ESUCCESS},
		{`{"approve_above":"0"}`, abi.ESUCCESS},
		{`{"approve_above":"500.01"}`, abi.EDENIED},
		{`{"provider":"http://evil.example"}`, abi.EINVAL},
		{`{"instrument":{"env":"X"}}`, abi.EINVAL},
		{`{"allow_private":true}`, abi.EINVAL},
		{`[]`, abi.EINVAL},
		{`{} {}`, abi.EINVAL},
	} {
		s, err := e.k.Narrow(e.scope, []byte(tc.req))
		if got := kindapi.ErrnoOf(err); got != tc.want {
			t.Errorf("narrow %s: %s (%v), want %s", tc.req, got, err, tc.want)
			continue
		}
		if err == nil && !e.scope.Contains(s) {
			t.Errorf("narrow %s: not contained by the parent", tc.req)
		}
	}
	// Widening names every field.
	_, err := e.k.Narrow(e.scope, []byte(`{"payees":["evil.example"],"max_amount":"5000","expires":"2099-01-01T00:00:00Z","approve_above":"600"}`))
	for _, f := range []string{"payees", "max_amount", "expires", "approve_above"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("widening error %v does not name %s", err, f)
		}
	}
	// A parent without limits: a child may add them, and is then bounded.
	f := newEnv(t, "")
	c := f.narrow(t, f.scope, `{"max_amount":"5","expires":"1h","approve_above":"1"}`)
	if _, err := f.k.Narrow(c, []byte(`{"max_amount":"6"}`)); kindapi.ErrnoOf(err) != abi.EDENIED {
		t.Errorf("grandchild widening the child's max_amount: %v", err)
	}
	// Contains is exact: a scope from another grant (another tree of
	// idempotency keys) is not within, even with identical limits.
	if e.scope.Contains(e.grant(t, `,"expires":"48h","approve_above":"500"`)) {
		t.Error("a scope of another grant is contained")
	}
	if c.Contains(f.scope) {
		t.Error("a child contains its parent")
	}
}

// TestNarrowProperty derives random chains through a kernel and checks
// that every scope is within all its ancestors, and that charges through
// the leaves never exceed any ancestor's limits: the kind's max_amount,
// and the kernel's budget and max_uses on every capability of the chain.
func TestNarrowProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	payees := []string{"a.example", "b.example", "c.example", "d.example"}
	e := newKenv(t, kgrant{name: "root", budget: "400", maxUses: 40, spec: func(url string) string {
		return `{"provider":"` + url + `","allow_private":true,"instrument":{"env":"` + testEnv + `"},` +
			`"payees":["a.example","b.example","c.example","d.example"],"currency":"USD","max_amount":"50","expires":"100h"}`
	}})
	root := e.root("root")
	randReq := func() string {
		var f []string
		if rng.IntN(2) == 0 {
			n := 1 + rng.IntN(len(payees))
			f = append(f, fmt.Sprintf(`"payees":["%s"]`, strings.Join(payees[:n], `","`)))
		}
		if rng.IntN(2) == 0 {
			f = append(f, fmt.Sprintf(`"max_amount":"%d.%02d"`, rng.IntN(70), rng.IntN(100)))
		}
		if rng.IntN(2) == 0 {
			f = append(f, fmt.Sprintf(`"budget":"%d"`, 1+rng.IntN(499)))
		}
		if rng.IntN(2) == 0 {
			f = append(f, fmt.Sprintf(`"max_uses":%d`, 1+rng.IntN(49)))
		}
		if rng.IntN(3) == 0 {
			f = append(f, fmt.Sprintf(`"expires":"%dh"`, 1+rng.IntN(120)))
		}
		if rng.IntN(3) == 0 {
			f = append(f, fmt.Sprintf(`"approve_above":"%d"`, rng.IntN(60)))
		}
		return "{" + strings.Join(f, ",") + "}"
	}
	var leaves [][]kcap // each a chain root..leaf
	derived, refused := 0, 0
	for range 300 {
		chain := []kcap{root}
		for range 1 + rng.IntN(5) {
			parent := chain[len(chain)-1]
			req := randReq()
			c, err := e.derive(parent, req)
			if err != nil {
				if e := kindapi.ErrnoOf(err); e != abi.EDENIED {
					t.Fatalf("derive %s: %v", req, err)
				}
				refused++
				continue
			}
			derived++
			for i, a := range chain {
				if !a.c.Scope().Contains(c.c.Scope()) {
					t.Fatalf("derived scope %s is not within ancestor %d %s", c.c.Scope(), i, a.c.Scope())
				}
			}
			chain = append(chain, c)
		}
		leaves = append(leaves, chain)
	}
	if derived == 0 || refused == 0 {
		t.Fatalf("derived %d, refused %d: the generator is not exercising both", derived, refused)
	}
	// Spend through random leaves (approving every approval); no
	// ancestor's limits are ever exceeded.
	e.approve(func(kernel.ApprovalRequest) (bool, error) { return true, nil })
	for i := range 400 {
		chain := leaves[rng.IntN(len(leaves))]
		leaf := chain[len(chain)-1]
		amt := fmt.Sprintf("%d.%02d", rng.IntN(60), rng.IntN(100))
		_, _ = e.charge(leaf, fmt.Sprintf(`{"payee":%q,"amount":%q,"currency":"USD","idempotency_key":"p%d"}`,
			payees[rng.IntN(len(payees))], amt, i))
		for _, a := range chain {
			u, ok := a.c.Usage()
			if ok && (u.Budget > 0 && u.Spent > u.Budget || u.MaxUses > 0 && u.Uses > u.MaxUses) {
				t.Fatalf("capability %s spent %d of %d in %d of %d uses", a.c.ID(), u.Spent, u.Budget, u.Uses, u.MaxUses)
			}
		}
	}
	for _, c := range e.p.Charges() {
		if c.AmountMinor > 5000 {
			t.Errorf("a charge of %d exceeds the root's max_amount", c.AmountMinor)
		}
	}
	if total := e.p.Total(); total > 40000 || len(e.p.Charges()) > 40 {
		t.Errorf("provider total %d in %d charges exceeds the root's budget", total, len(e.p.Charges()))
	}
	if len(e.p.Charges()) == 0 {
		t.Error("no charge went through: the property was not exercised")
	}
	if u := e.usage(root); u.Spent != e.p.Total() || u.Uses != int64(len(e.p.Charges())) {
		t.Errorf("root used %d in %d uses, provider %d in %d charges", u.Spent, u.Uses, e.p.Total(), len(e.p.Charges()))
	}
}
