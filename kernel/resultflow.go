package kernel

import (
	"fmt"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// The task's result as a sink (law 7 for the answer): a manifest's
// result { accepts_untrusted = false } refuses a result carrying any
// integrity taint; result { refuses_taints = [...] } one carrying a taint
// the patterns match, so an answer may be built from a trusted catalogue
// (its taint accepted) but not from reviews anyone can write (theirs
// refused). What the task writes to stdout once its label carries a
// refused taint is withheld the same way (output.go).

// refusesResultTaints reports whether the task's result refuses any
// taint at all.
func (t *Task) refusesResultTaints() bool {
	return t.resultRefuses.RefusesTainted || !t.resultRefuses.RefusedTaints.IsZero()
}

// resultFlow checks that a result labelled l may be the task's answer:
// EFLOW naming the refused taint otherwise.
func (t *Task) resultFlow(l kindapi.Label) error {
	taint, refused := t.resultRefuses.RefusedTaint(l)
	if !refused {
		return nil
	}
	where := "task " + t.id + "'s result"
	if t.resultRefuses.RefusesTainted {
		return taintErr("the result", l, where+" (result { accepts_untrusted = false })")
	}
	return kindapi.Errorf(abi.EFLOW, "the result is tainted by %s; %s refuses taints %s (result { refuses_taints })",
		taint, where, t.resultRefuses.RefusedTaints)
}

// resultRefusesText says why output written under label l is withheld.
func (t *Task) resultRefusesText(l kindapi.Label) string {
	if t.resultRefuses.RefusesTainted {
		return "its result may not carry untrusted data (result { accepts_untrusted = false })"
	}
	taint, _ := t.resultRefuses.RefusedTaint(l)
	return fmt.Sprintf("its result refuses the taint %s (result { refuses_taints = %s })", taint, t.resultRefuses.RefusedTaints)
}
