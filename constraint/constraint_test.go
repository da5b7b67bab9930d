package constraint

import (
	"context"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/kernel/kindapi"
)

func eval(t *testing.T, src string, vars []string, doc string) (bool, error) {
	t.Helper()
	c, err := New().Compile(src, vars)
	if err != nil {
		t.Fatalf("Compile(%s): %v", src, err)
	}
	v, err := kindapi.DecodeJSONValue([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return c.Eval(context.Background(), map[string]any{vars[0]: v})
}

func TestEval(t *testing.T) {
	for _, tc := range []struct {
		src, doc string
		want     bool
		err      string
	}{
		{`offer.duration_hours <= 12 && offer.stops <= 1`, `{"duration_hours": 9, "stops": 1}`, true, ""},
		{`offer.duration_hours <= 12 && offer.stops <= 1`, `{"duration_hours": 37, "stops": 3}`, false, ""},
		{`offer.duration_hours <= 12`, `{"duration_hours": 11.5}`, true, ""},
		{`offer.price <= 50.5`, `{"price": 50}`, true, ""},
		{`offer.recipient in ["GB29NWBK60161331926819"]`, `{"recipient": "GB29NWBK60161331926819"}`, true, ""},
		{`offer.recipient in ["GB29NWBK60161331926819"]`, `{"recipient": "DE00EVIL"}`, false, ""},
		// Missing context fails the check (law 5): an error, never true.
		{`offer.stops <= 1`, `{"duration_hours": 9}`, false, "no such key"},
		{`offer.stops <= 1`, `{"stops": "one"}`, false, "no such overload"},
	} {
		got, err := eval(t, tc.src, []string{"offer"}, tc.doc)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s on %s: got %v, %v; want error %q", tc.src, tc.doc, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s on %s = %v, %v; want %v", tc.src, tc.doc, got, err, tc.want)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	c := New()
	for _, src := range []string{
		`offer.stops <=`,   // syntax
		`unknown_var == 1`, // undeclared variable
		`1 + 2`,            // not a bool
		strings.Repeat("a", MaxSourceLen+1),
	} {
		if _, err := c.Compile(src, []string{"offer"}); err == nil {
			t.Errorf("Compile(%.40s) succeeded, want an error", src)
		}
	}
}

func TestCostLimit(t *testing.T) {
	c := New(WithCostLimit(1000))
	e, err := c.Compile(`args.xs.all(x, args.xs.all(y, x + y > 0))`, []string{"args"})
	if err != nil {
		t.Fatal(err)
	}
	xs := make([]any, 500)
	for i := range xs {
		xs[i] = int64(i + 1)
	}
	_, err = e.Eval(context.Background(), map[string]any{"args": map[string]any{"xs": xs}})
	if err == nil || !strings.Contains(err.Error(), "cost") {
		t.Fatalf("quadratic expression over 500 items: %v, want a cost limit error", err)
	}
}
