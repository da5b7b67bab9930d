// Command plan-pay submits a plan of charges on the "card" it holds, then
// makes the charges it is told to, in order, and reports each errno. Its
// input:
//
//	{"plan": [{"payee": "power.example", "amount": "84.20", "key": "k1"}, ...],
//	 "do":   [{"payee": "power.example", "amount": "84.20", "key": "k1"}, ...]}
//
// and its result {"plan": "ESUCCESS", "do": ["ESUCCESS", "EAPPROVAL", ...]}
// ("plan" is "" when the input has no plan).
package main

import (
	"encoding/json"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

type charge struct{ Payee, Amount, Key string }

func (c charge) args() []byte {
	b, _ := json.Marshal(map[string]any{"payee": c.Payee, "amount": c.Amount, "currency": "USD", "idempotency_key": c.Key})
	return b
}

func main() {
	in, err := mandate.InputBytes()
	if err != nil {
		panic(err)
	}
	var script struct{ Plan, Do []charge }
	if err := json.Unmarshal(in, &script); err != nil {
		panic(err)
	}
	card, err := mandate.Lookup("card")
	if err != nil {
		panic(err)
	}
	var out struct {
		Plan string   `json:"plan"`
		Do   []string `json:"do"`
	}
	if len(script.Plan) > 0 {
		items := make([]mandate.PlanItem, len(script.Plan))
		for i, c := range script.Plan {
			items[i] = mandate.PlanItem{Cap: card, Op: "charge", Args: c.args()}
		}
		out.Plan = mandate.ErrnoOf(mandate.SubmitPlan(items...)).String()
	}
	for _, c := range script.Do {
		_, err := card.Call("charge", c.args())
		out.Do = append(out.Do, mandate.ErrnoOf(err).String())
	}
	b, _ := json.Marshal(out)
	if err := mandate.SetResult(b); err != nil {
		panic(err)
	}
}
