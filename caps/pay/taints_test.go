package pay_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// TestRefusedTaints: a pay grant's refuses_taints refuses a charge by a
// task carrying a named taint (EFLOW naming it; nothing charged) and
// accepts one carrying another; accepts_untrusted = false refuses every
// taint; a child may refuse more, never less; the scope's JSON and
// description say what it refuses.
func TestRefusedTaints(t *testing.T) {
	e := newKenv(t, kgrant{name: "card", extra: `,"refuses_taints":["web:*"]`},
		kgrant{name: "strict", extra: `,"accepts_untrusted":false`})
	card, strict := e.root("card"), e.root("strict")
	if err := e.task.Observe(kindapi.NewLabel(nil, []string{"hotels:catalogue"})); err != nil {
		t.Fatal(err)
	}
	if _, err := e.charge(card, chargeArgs("airline.example", "10.00", "k1")); err != nil {
		t.Fatalf("a charge carrying hotels:catalogue under refuses_taints [web:*]: %v", err)
	}
	if _, err := e.charge(strict, chargeArgs("airline.example", "10.00", "k2")); kindapi.ErrnoOf(err) != abi.EFLOW {
		t.Errorf("a tainted charge under accepts_untrusted = false: %v, want EFLOW", err)
	}
	if err := e.task.Observe(kindapi.NewLabel(nil, []string{"web:reviews.example"})); err != nil {
		t.Fatal(err)
	}
	_, err := e.charge(card, chargeArgs("airline.example", "10.00", "k3"))
	if kindapi.ErrnoOf(err) != abi.EFLOW || !strings.Contains(err.Error(), "tainted by web:reviews.example") {
		t.Errorf("a charge carrying web:reviews.example: %v, want EFLOW naming it", err)
	}
	if n := len(e.p.Charges()); n != 1 {
		t.Errorf("the provider got %d charges, want 1", n)
	}

	for req, ok := range map[string]bool{
		`{"refuses_taints":["web:*","bank:tx"]}`: true,
		`{"refuses_taints":["*"]}`:               true,
		`{"accepts_untrusted":false}`:            true,
		`{"refuses_taints":[]}`:                  false,
		`{"refuses_taints":["web:a"]}`:           false,
	} {
		c, err := e.derive(card, req)
		switch {
		case ok && err != nil:
			t.Errorf("derive %s: %v", req, err)
		case ok && !card.c.Scope().Contains(c.c.Scope()):
			t.Errorf("derive %s: the parent does not contain the child", req)
		case !ok && kindapi.ErrnoOf(err) != abi.EDENIED:
			t.Errorf("derive %s: %v, want EDENIED", req, err)
		}
	}
	if _, err := e.derive(card, `{"refuses_taints":["a*b"]}`); kindapi.ErrnoOf(err) != abi.EINVAL {
		t.Errorf("a bad pattern: %v, want EINVAL", err)
	}
	if _, err := e.env.k.Grant(testGC, []byte(e.spec(`,"refuses_taints":[""]`))); err == nil || !strings.Contains(err.Error(), "refuses_taints") {
		t.Errorf("a grant with an empty pattern: %v, want an error naming refuses_taints", err)
	}

	var j map[string]any
	b, _ := json.Marshal(card.c.Scope())
	if err := json.Unmarshal(b, &j); err != nil || j["accepts_untrusted"] != nil || len(j["refuses_taints"].([]any)) != 1 {
		t.Errorf("the scope's JSON: %s", b)
	}
	d := e.env.k.Describe(card.c.Scope())
	if d.Sink == nil || !slices.Equal(d.Sink.RefusedTaints.List(), []string{"web:*"}) ||
		!slices.Contains(d.Fields, kindapi.Detail{Name: "refuses_taints", Value: "web:*"}) {
		t.Errorf("the description: %+v", d)
	}
}
