package pay

import (
	"context"
	"slices"
	"testing"

	"github.com/mandatevm/mandate/constraint"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/kernel/kindapi/kindtest"
)

// The person's intent as constraints: at most 12 hours, at most one stop,
// at most 800.
func TestActivationConstraints(t *testing.T) {
	k := New()
	if !slices.Equal(k.Info().Vars, []string{"charge", "offer"}) {
		t.Fatalf("constraints see %v, want charge and offer", k.Info().Vars)
	}
	c, err := constraint.New().Compile(`offer.duration_hours <= 12 && offer.stops <= 1 && charge.amount <= 800 && charge.payee == "airline.example"`, k.Info().Vars)
	if err != nil {
		t.Fatal(err)
	}
	s, err := k.Grant(fuzzGC, []byte(`{"provider":"https://pay.example","instrument":{"env":"PAY_FUZZ_CARD"},"payees":["airline.example"],"currency":"USD"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args      string
		want, err bool
	}{
		{`{"payee":"airline.example","amount":"612.00","currency":"USD","offer":{"duration_hours":9,"stops":1}}`, true, false},
		{`{"payee":"airline.example","amount":"609.00","currency":"USD","offer":{"duration_hours":37,"stops":3}}`, false, false},
		{`{"payee":"airline.example","amount":"900.00","currency":"USD","offer":{"duration_hours":9,"stops":0}}`, false, false},
		{`{"payee":"airline.example","amount":"612.00","currency":"USD"}`, false, true}, // no offer: cannot be evaluated
	} {
		act, err := kerneltest.Vars(k, kindtest.NewCall("charge", []byte(tc.args), s, kindapi.TaskInfo{}, nil, nil))
		if err != nil {
			t.Fatalf("Vars(%s): %v", tc.args, err)
		}
		got, err := c.Eval(context.Background(), act)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%s: got %v, %v; want %v (error %v)", tc.args, got, err, tc.want, tc.err)
		}
	}
}
