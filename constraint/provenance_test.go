package constraint

import (
	"context"
	"testing"

	"github.com/mandatevm/mandate/kernel"
)

func TestProvenanceMacros(t *testing.T) {
	c := New()
	bound := `spliced(request.body.recipient) && from(request.body.recipient).integ == ["bank:transactions.sender"]`
	e, err := c.Compile(bound, []string{"request"})
	if err != nil {
		t.Fatal(err)
	}
	req := map[string]any{"body": map[string]any{"recipient": "GB29NWBK60161331926819", "items": []any{"x"}}}
	act := func(prov map[string]any) map[string]any {
		return map[string]any{"request": req, kernel.ProvenanceVar: prov}
	}
	sender := map[string]any{"integ": []any{"bank:transactions.sender"}, "conf": []any{}, "path": "$.transactions[0].sender"}
	subject := map[string]any{"integ": []any{"bank:tx"}, "conf": []any{}, "path": "$.transactions[0].subject"}
	for _, tc := range []struct {
		name string
		prov map[string]any
		want bool
	}{
		{"spliced from the sender field", map[string]any{"request.body.recipient": sender}, true},
		{"typed by the guest", map[string]any{}, false},
		{"spliced from the free-text subject", map[string]any{"request.body.recipient": subject}, false},
		{"another field spliced", map[string]any{"request.body.amount": sender}, false},
	} {
		got, err := e.Eval(context.Background(), act(tc.prov))
		if err != nil || got != tc.want {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	// from() of a value that was not spliced denies (an evaluation error).
	f, err := c.Compile(`from(request.body.recipient).path == "$.x"`, []string{"request"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Eval(context.Background(), act(map[string]any{})); err == nil {
		t.Error("from() of a typed value evaluated")
	}
	// Index forms name the same place.
	for src, place := range map[string]string{
		`spliced(request.body["recipient"])`: "request.body.recipient",
		`spliced(request.body.items[0])`:     "request.body.items[0]",
	} {
		e, err := c.Compile(src, []string{"request"})
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if ok, err := e.Eval(context.Background(), act(map[string]any{place: sender})); !ok || err != nil {
			t.Errorf("%s: %v %v, want true for place %s", src, ok, err, place)
		}
	}
	for _, src := range []string{
		`spliced("x")`, `spliced(request.body.recipient + "x")`, `from(mandate_provenance)`, `spliced(has(request.body))`,
		`spliced(request.body["payee.iban"])`,
	} {
		if _, err := c.Compile(src, []string{"request"}); err == nil {
			t.Errorf("%s compiled", src)
		}
	}
}
