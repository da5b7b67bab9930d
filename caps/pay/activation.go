package pay

import (
	"errors"
	"fmt"

	"github.com/mandatevm/mandate/kernel"
)

var _ kernel.Activator = (*Kind)(nil)

// Vars implements kernel.Activator: constraints on a pay capability see
// the charge and what it buys.
func (k *Kind) Vars() []string { return []string{"charge", "offer"} }

// Activation implements kernel.Activator. A `when` or `approve_when` on a
// pay capability sees
//
//	offer    the charge's "offer" object as the guest sent it ({} when absent)
//	charge   {"payee", "currency", "amount" (a number in major units, 612.5),
//	          "amount_minor" (an integer, 61250), "description", "idempotency_key"}
//
// so the person's intent can be written as, e.g.,
//
//	offer.duration_hours <= 12 && offer.stops <= 1
//
// An offer without the fields a constraint names fails the constraint's
// evaluation, which denies the charge.
func (k *Kind) Activation(call *kernel.Call) (map[string]any, error) {
	v, err := kernel.DecodeJSONValue(call.Args)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("charge arguments are not an object")
	}
	offer, _ := m["offer"].(map[string]any)
	if offer == nil {
		offer = map[string]any{}
	}
	charge := map[string]any{}
	for _, f := range []string{"payee", "currency", "description", "idempotency_key"} {
		if s, ok := m[f].(string); ok {
			charge[f] = s
		}
	}
	if s, ok := m["amount"].(string); ok {
		minor, _, err := parseMoney(s, "")
		if err != nil {
			return nil, fmt.Errorf("amount: %v", err)
		}
		charge["amount_minor"] = minor
		charge["amount"] = float64(minor) / 100
	} else if n, ok := m["amount"].(int64); ok {
		// Bounded as a charge is: n*100 must not wrap around, or a huge
		// amount would pass charge.amount_minor <= LIMIT.
		if n < 0 || n > MaxMinor/100 {
			return nil, fmt.Errorf("amount %d is out of range (0 to %d)", n, MaxMinor/100)
		}
		charge["amount_minor"] = n * 100
		charge["amount"] = float64(n)
	} else if f, ok := m["amount"].(float64); ok {
		charge["amount"] = f
	}
	return map[string]any{"charge": charge, "offer": offer}, nil
}
