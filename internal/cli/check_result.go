package cli

// mandate check's view of the task's answer: which taints it could carry,
// by the capabilities that bring them in, and which of them its result
// block refuses (result { accepts_untrusted = false } or refuses_taints):
// an answer written after reading from such a source is refused (EFLOW).

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/manifest"
)

// checkResult is what the manifest's result block refuses and which of
// the taints the task could read it would refuse.
type checkResult struct {
	AcceptsUntrusted bool     `json:"accepts_untrusted"`
	RefusesTaints    []string `json:"refuses_taints,omitempty"`
	// CouldCarry is every integrity taint a capability's results carry,
	// with the capabilities bringing it, and whether the result refuses
	// it.
	CouldCarry []checkTaint `json:"could_carry"`
	// Refused lists the capabilities whose data the answer refuses.
	Refused []string `json:"refused"`
	Verdict string   `json:"verdict"`
}

// checkTaint is one taint the task's answer could carry.
type checkTaint struct {
	Taint   string   `json:"taint"`
	From    []string `json:"from"`
	Refused bool     `json:"refused"`
}

// capTaints are the integrity taints one capability's results carry.
type capTaints struct {
	cap    string
	taints []string
}

// checkResultOf is the report's result section; nil when the manifest's
// result refuses nothing.
func checkResultOf(m *manifest.Manifest, caps []capTaints) *checkResult {
	sink := kindapi.Sink{RefusesTainted: m.RefuseTaintedResult, RefusedTaints: m.RefusedResultTaints}
	if !sink.RefusesTainted && sink.RefusedTaints.IsZero() {
		return nil
	}
	r := &checkResult{AcceptsUntrusted: !sink.RefusesTainted, RefusesTaints: sink.RefusedTaints.List(),
		CouldCarry: []checkTaint{}, Refused: []string{}}
	from := map[string][]string{}
	for _, c := range caps {
		for _, t := range c.taints {
			from[t] = append(from[t], c.cap)
		}
	}
	refusedCaps := map[string]bool{}
	for t, cs := range from {
		_, refused := sink.RefusedTaint(kindapi.NewLabel(nil, []string{t}))
		r.CouldCarry = append(r.CouldCarry, checkTaint{Taint: t, From: cs, Refused: refused})
		if refused {
			for _, c := range cs {
				refusedCaps[c] = true
			}
		}
	}
	sort.Slice(r.CouldCarry, func(i, j int) bool { return r.CouldCarry[i].Taint < r.CouldCarry[j].Taint })
	r.Refused = sortedSet(refusedCaps)
	if len(r.Refused) == 0 {
		r.Verdict = "no capability brings in a taint the result refuses"
	} else {
		r.Verdict = fmt.Sprintf("an answer written after reading from %s is refused (EFLOW naming the taint)", strings.Join(r.Refused, ", "))
	}
	return r
}

// writeCheckResult writes the result section as text.
func writeCheckResult(w io.Writer, r *checkResult) {
	if r == nil {
		return
	}
	p := kindapi.Printable
	head := "accepts_untrusted false"
	if r.AcceptsUntrusted {
		head = "refuses_taints " + tagSet(r.RefusesTaints)
	}
	fmt.Fprintf(w, "\nresult: %s\n", head)
	for _, t := range r.CouldCarry {
		verdict := "accepted"
		if t.Refused {
			verdict = "refused"
		}
		fmt.Fprintf(w, "  %s from %s: %s\n", p(t.Taint), printableList(t.From), verdict)
	}
	fmt.Fprintf(w, "  %s\n", p(r.Verdict))
}
