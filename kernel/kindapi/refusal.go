package kindapi

import (
	"slices"
	"strings"
)

// Refusal is what a sink refuses of integrity taints, as a grant says it:
// accepts_untrusted = false refuses every taint, refuses_taints those its
// patterns match. A kind whose scope sends data out keeps one and hands
// it to the kernel as its Sink (Refusal.Sink); narrowing may only refuse
// more. It is an immutable value; the zero Refusal refuses nothing.
type Refusal struct {
	all    bool
	taints TaintPatterns
}

// ParseRefusal reads a grant's accepts_untrusted (nil: true) and
// refuses_taints (nil: none). The error concerns refuses_taints.
func ParseRefusal(acceptsUntrusted *bool, refusesTaints []string) (Refusal, error) {
	var r Refusal
	if acceptsUntrusted != nil {
		r.all = !*acceptsUntrusted
	}
	if refusesTaints != nil {
		var err error
		if r.taints, err = ParseTaintPatterns(refusesTaints); err != nil {
			return Refusal{}, err
		}
	}
	return r, nil
}

// Narrow applies a cap_derive request's accepts_untrusted and
// refuses_taints (nil: keep r's) and says, in widen, what the request
// would drop of r (a widening: the caller refuses it with EDENIED). The
// error concerns refuses_taints.
func (r Refusal) Narrow(acceptsUntrusted *bool, refusesTaints []string) (child Refusal, widen []string, err error) {
	child = r
	if acceptsUntrusted != nil {
		if *acceptsUntrusted && r.all {
			widen = append(widen, "accepts_untrusted true but the capability refuses untrusted data")
		}
		child.all = !*acceptsUntrusted
	}
	if refusesTaints != nil {
		ts, err := ParseTaintPatterns(refusesTaints)
		if err != nil {
			return Refusal{}, nil, err
		}
		// Refusing more is narrower; no refused taint may be dropped
		// (unless the child refuses every taint: its own, not r's).
		child.taints = ts
		for _, p := range r.taints.List() {
			if one, _ := ParseTaintPatterns([]string{p}); !ts.Covers(one) && !child.RefusesAll() {
				widen = append(widen, "refuses_taints drops "+p)
			}
		}
	}
	return child, widen, nil
}

// RefusesAll reports whether r refuses every taint: accepts_untrusted =
// false, or a refused taint "*".
func (r Refusal) RefusesAll() bool { return r.all || slices.Contains(r.taints.List(), "*") }

// Within reports whether r refuses at least every taint parent refuses.
func (r Refusal) Within(parent Refusal) bool {
	if r.RefusesAll() {
		return true
	}
	return !parent.all && r.taints.Covers(parent.taints)
}

// AcceptsUntrusted is the grant's accepts_untrusted.
func (r Refusal) AcceptsUntrusted() bool { return !r.all }

// Taints are the grant's refuses_taints.
func (r Refusal) Taints() TaintPatterns { return r.taints }

// Sink is a sink cleared for clearance that refuses what r refuses.
func (r Refusal) Sink(clearance Label) *Sink {
	return &Sink{Clearance: clearance, RefusesTainted: r.all, RefusedTaints: r.taints}
}

// Details are r's fields as a Description shows them, none when r
// refuses nothing.
func (r Refusal) Details() []Detail {
	var d []Detail
	if r.all {
		d = append(d, Detail{Name: "accepts_untrusted", Value: "false"})
	}
	if !r.taints.IsZero() {
		d = append(d, Detail{Name: "refuses_taints", Value: strings.Join(r.taints.List(), ",")})
	}
	return d
}
