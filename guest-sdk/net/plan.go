package net

import (
	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// PlanFetch is the plan item (mandate.SubmitPlan) of performing req on the
// net capability c: the same request Fetch(c, req) makes later is then
// allowed once without a question of its own.
func PlanFetch(c mandate.Cap, req abi.HTTPRequest) (mandate.PlanItem, error) {
	args, err := abi.EncodeHTTPRequest(req)
	if err != nil {
		return mandate.PlanItem{}, err
	}
	return mandate.PlanItem{Cap: c, Op: abi.NetFetchOp, Args: args}, nil
}
