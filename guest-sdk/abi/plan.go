package abi

import "encoding/json"

// PlanSubmitName is the host call that submits a plan: the effects a task
// intends, shown to a person whole and approved once (ABI.md,
// plan_submit). It is declared beside its implementation in the runtime
// (kernel/plan.go), like every host call.
const PlanSubmitName = "plan_submit"

// MaxPlanItems bounds the items of one plan, and MaxPlans the plans one
// task may submit: a person reads a plan whole, so it stays short.
const (
	MaxPlanItems = 64
	MaxPlans     = 8
)

// Plan is plan_submit's request: the effects a task intends, each the
// exact call it will make later (the same capability, operation and
// argument document it will pass to cap_call). Every item must be on a
// capability whose manifest allows plans (approve_plans = true).
type Plan struct {
	Items []PlanItem `json:"items"`
}

// PlanItem is one intended effect: the operation op of the capability
// Cap, with the argument document Args (one JSON value, exactly as
// cap_call will be given it; the kernel compares effects, not bytes, so
// white space and key order do not matter where the kind decodes them).
type PlanItem struct {
	Cap  Handle          `json:"cap"`
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args"`
}

// EncodePlan encodes a plan as plan_submit takes it.
func EncodePlan(p Plan) ([]byte, error) { return json.Marshal(p) }

// DecodePlan decodes plan_submit's request strictly (CheckJSON, no
// unknown fields).
func DecodePlan(b []byte) (Plan, error) {
	var p Plan
	if err := DecodeJSON(b, &p); err != nil {
		return Plan{}, err
	}
	return p, nil
}
