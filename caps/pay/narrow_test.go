package pay_test

import (
	"context"
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
		{`{` + base + `,"budget":"1e5"}`, "budget"},
		{`{` + base + `,"approve_above":"x"}`, "approve_above"},
		{`{` + base + `,"max_uses":-1}`, "max_uses"},
		{`{` + base + `,"expires":"tomorrow"}`, "expires"},
		{`{` + base + `,"expires":"-1h"}`, "expires"},
		{`{` + base + `,"timeout":"1h"}`, "timeout"},
		{`{` + base + `,"bogus":1}`, "bogus"},
	} {
		_, err := e.k.Grant(kernel.GrantContext{Dir: dir, LookupEnv: testGC.LookupEnv}, []byte(tc.spec))
		var fe *kernel.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("grant %s: %v, want a FieldError on %s", tc.spec, err, tc.field)
		} else if strings.Contains(err.Error(), testInstrument) {
			t.Errorf("grant error shows the instrument: %v", err)
		}
	}
	// From a file, relative to the manifest; values parsed.
	s, err := e.k.Grant(kernel.GrantContext{Dir: dir}, []byte(`{`+p+`,"instrument":{"file":"card"},"payees":["B.example","a.example","b.example"],"currency":"eur",`+
		`"max_amount":"800.5 EUR","budget":1000,"approve_above":"500.00","max_uses":3,"expires":"2030-01-02T03:04:05Z"}`))
	if err != nil {
		t.Fatal(err)
	}
	ps := s.(*pay.Scope)
	if fmt.Sprint(ps.Payees()) != "[a.example b.example]" || ps.Currency() != "EUR" || ps.MaxAmount() != 80050 ||
		ps.Budget() != 100000 || ps.ApproveAbove() != 50000 || ps.MaxUses() != 3 || ps.Expires().Year() != 2030 {
		t.Errorf("scope %s", ps)
	}
}

func TestNarrowRequests(t *testing.T) {
	e := newEnv(t, `,"budget":"1000","max_uses":10,"expires":"48h","approve_above":"500"`)
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
		{`{"budget":"1000"}`, abi.ESUCCESS},
		{`{"budget":"1000.01"}`, abi.EDENIED},
		{`{"budget":"-1"}`, abi.EINVAL},
		{`{"max_uses":10}`, abi.ESUCCESS},
		{`{"max_uses":11}`, abi.EDENIED},
		{`{"max_uses":-1}`, abi.EINVAL},
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
		if got := kernel.ErrnoOf(err); got != tc.want {
			t.Errorf("narrow %s: %s (%v), want %s", tc.req, got, err, tc.want)
			continue
		}
		if err == nil && !e.scope.Contains(s) {
			t.Errorf("narrow %s: not contained by the parent", tc.req)
		}
	}
	// Widening names every field.
	_, err := e.k.Narrow(e.scope, []byte(`{"payees":["evil.example"],"budget":"5000","max_uses":99}`))
	for _, f := range []string{"payees", "budget", "max_uses"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("widening error %v does not name %s", err, f)
		}
	}
	// A parent without limits: a child may add them, and is then bounded.
	f := newEnv(t, "")
	c := f.narrow(t, f.scope, `{"budget":"5","max_uses":1,"expires":"1h","approve_above":"1"}`)
	if _, err := f.k.Narrow(c, []byte(`{"budget":"6"}`)); kernel.ErrnoOf(err) != abi.EDENIED {
		t.Errorf("grandchild widening the child's budget: %v", err)
	}
	// Contains is exact: a scope from another grant (another ledger) is
	// not within, even with identical limits.
	if e.scope.Contains(e.grant(t, `,"budget":"1000","max_uses":10,"expires":"48h","approve_above":"500"`)) {
		t.Error("a scope with its own ledger is contained")
	}
	if c.Contains(f.scope) {
		t.Error("a child contains its parent")
	}
}

// TestNarrowProperty derives random chains and checks that every scope is
// within all its ancestors, and that charges through the leaves never
// exceed any ancestor's limits.
func TestNarrowProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	payees := []string{"a.example", "b.example", "c.example", "d.example"}
	e := newEnv(t, "")
	root, err := e.k.Grant(testGC, []byte(`{"provider":"`+e.p.URL+`","allow_private":true,"instrument":{"env":"`+testEnv+`"},`+
		`"payees":["a.example","b.example","c.example","d.example"],"currency":"USD","max_amount":"50","budget":"400","max_uses":40,"expires":"100h"}`))
	if err != nil {
		t.Fatal(err)
	}
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
			f = append(f, fmt.Sprintf(`"budget":"%d"`, rng.IntN(500)))
		}
		if rng.IntN(2) == 0 {
			f = append(f, fmt.Sprintf(`"max_uses":%d`, rng.IntN(50)))
		}
		if rng.IntN(3) == 0 {
			f = append(f, fmt.Sprintf(`"expires":"%dh"`, 1+rng.IntN(120)))
		}
		if rng.IntN(3) == 0 {
			f = append(f, fmt.Sprintf(`"approve_above":"%d"`, rng.IntN(60)))
		}
		return "{" + strings.Join(f, ",") + "}"
	}
	var leaves [][]kernel.Scope // each a chain root..leaf
	derived, refused := 0, 0
	for range 300 {
		chain := []kernel.Scope{root}
		for range 1 + rng.IntN(5) {
			parent := chain[len(chain)-1]
			s, err := e.k.Narrow(parent, []byte(randReq()))
			if err != nil {
				if e := kernel.ErrnoOf(err); e != abi.EDENIED {
					t.Fatalf("narrow: %v", err)
				}
				refused++
				continue
			}
			derived++
			for i, a := range chain {
				if !a.Contains(s) {
					t.Fatalf("derived scope %s is not within ancestor %d %s", s, i, a)
				}
			}
			if s.Contains(parent) {
				t.Fatalf("child %s contains its parent %s", s, parent)
			}
			chain = append(chain, s)
		}
		leaves = append(leaves, chain)
	}
	if derived == 0 || refused == 0 {
		t.Fatalf("derived %d, refused %d: the generator is not exercising both", derived, refused)
	}
	// Spend through random leaves; no ancestor's limits are ever exceeded.
	for i := range 400 {
		chain := leaves[rng.IntN(len(leaves))]
		leaf := chain[len(chain)-1]
		amt := fmt.Sprintf("%d.%02d", rng.IntN(60), rng.IntN(100))
		_, _ = e.charge(leaf, fmt.Sprintf(`{"payee":%q,"amount":%q,"currency":"USD","idempotency_key":"p%d"}`,
			payees[rng.IntN(len(payees))], amt, i), func(_ context.Context, _ string, _ map[string]any) error { return nil })
		for _, a := range chain {
			sc := a.(*pay.Scope)
			spent, uses := sc.Spent()
			if sc.Budget() >= 0 && spent > sc.Budget() || sc.MaxUses() >= 0 && uses > sc.MaxUses() {
				t.Fatalf("scope %s spent %d in %d uses", sc, spent, uses)
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
	rs, ru := root.(*pay.Scope).Spent()
	if rs != e.p.Total() || ru != int64(len(e.p.Charges())) {
		t.Errorf("root ledger %d/%d, provider %d/%d", rs, ru, e.p.Total(), len(e.p.Charges()))
	}
}
