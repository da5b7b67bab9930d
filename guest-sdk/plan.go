package mandate

import "github.com/mandatevm/mandate/guest-sdk/abi"

// PlanItem is one effect a plan names: the call the task will make later,
// exactly (the same capability, operation and argument document).
type PlanItem struct {
	Cap  Cap
	Op   string
	Args []byte // one JSON value: the argument document cap_call will get
}

// SubmitPlan asks the person, once, to approve every effect of a plan
// (plan_submit), shown whole. On nil the task holds the plan: each later
// call whose effect is exactly one of its items, and would need a yes, is
// allowed without a question, once. Anything else is asked about (or
// refused) as before, and each call still passes every other check of its
// capability. Each item's capability must allow plans (approve_plans =
// true in the manifest). EAPPROVAL: the person said no (the task holds no
// plan); EDENIED: an item is refused as a call would be, or its capability
// does not allow plans; nobody was asked.
//
//	pay, _ := mandate.Lookup("payments")
//	err := mandate.SubmitPlan(
//		mandate.PlanItem{Cap: pay, Op: "charge", Args: []byte(`{"payee":"power.example","amount":"84.20"}`)},
//		mandate.PlanItem{Cap: pay, Op: "charge", Args: []byte(`{"payee":"gym.example","amount":"30.00"}`)},
//	)
//
// For a net capability, net.PlanFetch makes the item of a request.
func SubmitPlan(items ...PlanItem) error {
	p := abi.Plan{Items: make([]abi.PlanItem, len(items))}
	for i, it := range items {
		p.Items[i] = abi.PlanItem{Cap: it.Cap.h, Op: it.Op, Args: it.Args}
	}
	b, err := abi.EncodePlan(p)
	if err != nil {
		return err
	}
	if e := planSubmit(ptr(b), uint32(len(b))); e != abi.ESUCCESS {
		return fail(abi.PlanSubmitName, e)
	}
	return nil
}
