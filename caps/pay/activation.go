package pay

import (
	"errors"
	"fmt"

	"github.com/mandatevm/mandate/kernel/kindapi"
)

// vars names what constraints on a pay capability see: the charge and
// what it buys.
var vars = []string{"charge", "offer"}

// chargeVars is what a `when` or `approve_when` on a pay capability sees:
// the charge exactly as Prepare decoded it and as it will be sent, never a
// second reading of the arguments (a second reading could differ: JSON
// keys that differ only in case, {"amount":"1.00","Amount":"5000.00"},
// decode into one field of chargeArgs but stay two keys of a map):
//
//	offer    the charge's "offer" object ({} when absent)
//	charge   {"payee" (lower case), "currency" (upper case), "amount" (a
//	          number in major units, 612.5), "amount_minor" (an integer,
//	          61250), "description", "idempotency_key" (as the guest gave it)}
//
// so the person's intent can be written as, e.g.,
//
//	offer.duration_hours <= 12 && offer.stops <= 1
//
// An offer without the fields a constraint names fails the constraint's
// evaluation, which denies the charge; an offer a server could read
// differently (a duplicated key, a number the constraint would not see
// exactly) cannot be judged and is refused.
func chargeVars(payee, currency string, amount int64, description, key string, offer []byte) (map[string]any, error) {
	o := map[string]any{}
	if len(offer) > 0 && string(offer) != "null" {
		v, err := kindapi.DecodeJSONValue(offer)
		if err != nil {
			return nil, fmt.Errorf("offer: %w", err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, errors.New("offer is not an object")
		}
		o = m
	}
	charge := map[string]any{
		"payee": payee, "currency": currency, "description": description,
		"amount_minor": amount, "amount": float64(amount) / 100,
	}
	if key != "" {
		charge["idempotency_key"] = key
	}
	return map[string]any{"charge": charge, "offer": o}, nil
}
