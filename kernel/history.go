package kernel

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// History in constraints (issue 16): a capability's `when` and
// `approve_when` may read uses, the calls of it and of everything derived
// from it that had an effect, newest first, and now, the time the call
// is decided. Each use is the variables its call was checked with (the
// kind's: for net, request), with two fields of the kernel's:
//
//	time     when the call was decided (a timestamp)
//	pending  true while its effect has not ended
//
// so that "bind on first use", "one per recipient", "the same order id
// as before" and "at most 100.00 in total" are one line each (package
// constraint has the examples and sum()).
//
// What is a use. A call is recorded as pending when its constraints
// passed, in the same step and under the same locks as the check, and is
// kept or forgotten when the call ends, exactly when its max_uses are
// committed or given back (the reservation in mediator.go): a call
// refused at any step (flow, constraints, approval, audit) is not a use;
// an effect that ran is one, and so is an effect that failed after
// something may have left the kernel (kindapi.Performed: a timeout); an
// effect that did nothing (kindapi.NotPerformed) or replayed another call's
// (Result.Free) is forgotten. Derivations are not uses.
//
// Races. Checking and recording happen under the locks of every history
// on the capability's chain, taken root first (as reserveAllowance takes
// its locks), so of two calls racing past a rule such as "no two uses
// with the same recipient", the second to take the locks sees the first,
// pending, and is refused. A pending use may still be forgotten (its
// effect did nothing, a person said no): a rule that needs an earlier use
// to have happened, rather than to be absent, should read u.pending.
//
// Bounds. A history keeps the newest MaxHistory uses; older ones are
// forgotten, so "at most one per recipient" holds among the last
// MaxHistory uses only: a manifest that needs an exact bound over the
// whole life of the capability also sets max_uses (at most MaxHistory),
// which the kernel counts without forgetting. A use is a copy of its
// variables, of at most MaxUseBytes (about the size of their JSON): a
// call whose variables are larger, on a capability whose chain keeps a
// history, is refused with ELIMIT at the constraints step (before its
// effect, so nothing is spent), rather than recorded truncated: a
// truncated use would be judged for what it was not. History is kept only on the capabilities whose own
// constraints read uses (Referencer), and it lives on them: Kernel.Forget
// drops the capabilities of ended tasks, never an ancestor that remains,
// so the uses a forgotten child made stay in its ancestors' histories.
//
// The activation. Constraints see now whenever one on the chain reads
// now or uses; each capability's constraints see its own history as
// uses, never another's.

const (
	// UsesVar is the variable constraints read the history from.
	UsesVar = "uses"
	// NowVar is the variable holding the time a call is decided.
	NowVar = "now"
	// UseTimeField and UsePendingField are the kernel's fields of a use.
	UseTimeField    = "time"
	UsePendingField = "pending"

	// MaxHistory is how many uses a capability's history keeps.
	MaxHistory = 64
	// MaxUseBytes bounds one use (its variables, about as JSON).
	MaxUseBytes = 16 << 10
)

// Referencer is implemented by a Constraint that can tell which
// variables it reads (package constraint: from CEL's checked
// expression). The kernel keeps a history, and gives the time, only for
// constraints that say they read uses or now; a Constraint that cannot
// say gets neither, so one that reads them anyway cannot be evaluated,
// which denies (law 5).
type Referencer interface {
	References(name string) bool
}

// References reports whether a constraint of cs reads the variable name.
func (cs Constraints) References(name string) bool {
	for _, list := range [][]Constraint{cs.When, cs.ApproveWhen} {
		for _, c := range list {
			if r, ok := c.(Referencer); ok && r.References(name) {
				return true
			}
		}
	}
	return false
}

// reservedVar reports whether a kind may not name a variable name: the
// kernel's own, and the fields it adds to a use.
func reservedVar(name string) bool {
	switch name {
	case UsesVar, NowVar, UseTimeField, UsePendingField:
		return true
	}
	return false
}

// history is the uses of a capability's subtree that its constraints see.
type history struct {
	mu sync.Mutex
	// uses and views are parallel, newest first, at most MaxHistory:
	// each use and the value constraints see of it. Constraints read
	// views while mu is held (checkWithHistory), so it is edited in
	// place. Protected by mu.
	uses  []*use
	views []any
}

// newHistory returns a history for a capability carrying cs, or nil
// when none of cs reads uses.
func newHistory(cs Constraints) *history {
	if !cs.References(UsesVar) {
		return nil
	}
	return &history{}
}

// use is one call recorded in the histories of its capability's chain.
type use struct {
	c    *Cap           // the capability called: its chain holds the histories
	view map[string]any // the kind's variables, time, pending: true
}

// checkWithHistory is checkConstraints on a chain where a constraint
// reads uses or now: now is set, and when some capability of the chain
// keeps a history, the constraints are evaluated and the call recorded
// as pending in every history of the chain under their locks, root
// first; r then holds the use until the call ends.
func checkWithHistory(ctx context.Context, c *Cap, act map[string]any, r *reservation) ([]string, error) {
	at := now()
	act[NowVar] = at
	if c.chain&chainHistory == 0 {
		return evalConstraints(ctx, c, act)
	}
	u, err := newUse(c, act, at)
	if err != nil {
		return nil, err
	}
	var local [8]*history // no allocation for chains of up to 8
	hs := local[:0]
	for x := c; x != nil; x = x.parent {
		if x.hist != nil {
			hs = append(hs, x.hist)
		}
	}
	for i := len(hs) - 1; i >= 0; i-- {
		hs[i].mu.Lock()
	}
	defer func() {
		for _, h := range hs {
			h.mu.Unlock()
		}
	}()
	need, err := evalConstraints(ctx, c, act)
	if err != nil {
		return nil, err
	}
	for _, h := range hs {
		h.add(u)
	}
	r.use = u
	return need, nil
}

// showUses sets the uses x's constraints see: x's history, or none.
//
// Preconditions: x.hist.mu is held when x.hist is not nil.
func showUses(x *Cap, act map[string]any) {
	if x.hist != nil {
		act[UsesVar] = x.hist.views
	} else {
		delete(act, UsesVar)
	}
}

// newUse copies the kind's variables of act into a pending use of c.
func newUse(c *Cap, act map[string]any, at time.Time) (*use, error) {
	view := make(map[string]any, len(c.reg.vars)+2)
	budget := MaxUseBytes
	for _, name := range c.reg.vars {
		v, ok := act[name]
		if !ok {
			continue
		}
		cp, err := copyValue(v, &budget)
		if err != nil {
			return nil, err
		}
		view[name] = cp
	}
	view[UseTimeField] = at
	view[UsePendingField] = true
	return &use{c: c, view: view}, nil
}

// copyValue copies a JSON-like value (kindapi.DecodeJSONValue's types),
// taking about its JSON size from budget: ELIMIT once it runs out.
func copyValue(v any, budget *int) (any, error) {
	take := func(n int) error {
		if *budget -= n; *budget < 0 {
			return kindapi.Errorf(abi.ELIMIT, "the call's variables exceed the %d bytes a use in a capability's history may hold", MaxUseBytes)
		}
		return nil
	}
	switch x := v.(type) {
	case nil:
		return nil, take(4)
	case bool:
		return x, take(5)
	case int64, float64, int:
		return x, take(8)
	case string:
		return x, take(len(x) + 2)
	case []any:
		if err := take(2); err != nil {
			return nil, err
		}
		out := make([]any, len(x))
		for i, e := range x {
			cp, err := copyValue(e, budget)
			if err != nil {
				return nil, err
			}
			out[i] = cp
			if err := take(1); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[string]any:
		if err := take(2); err != nil {
			return nil, err
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			if err := take(len(k) + 4); err != nil {
				return nil, err
			}
			cp, err := copyValue(e, budget)
			if err != nil {
				return nil, err
			}
			out[k] = cp
		}
		return out, nil
	}
	return nil, kindapi.Errorf(abi.EDENIED, "constraints cannot be evaluated: a value of type %T cannot be kept in a capability's history", v)
}

// add records u, newest, forgetting the oldest past MaxHistory.
//
// Preconditions: h.mu is held.
func (h *history) add(u *use) {
	if len(h.uses) < MaxHistory {
		h.uses, h.views = append(h.uses, nil), append(h.views, nil)
	}
	copy(h.uses[1:], h.uses)
	copy(h.views[1:], h.views)
	h.uses[0], h.views[0] = u, u.view
}

// replace sets u's view to view, or forgets u when view is nil (u may be
// gone already: forgotten as the oldest).
func (h *history) replace(u *use, view map[string]any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := slices.Index(h.uses, u)
	switch {
	case i < 0:
	case view == nil:
		h.uses, h.views = slices.Delete(h.uses, i, i+1), slices.Delete(h.views, i, i+1)
	default:
		h.views[i] = view
	}
}

// end keeps u as done (keep) or forgets it, in every history of its
// chain. Nil-safe.
func (u *use) end(keep bool) {
	if u == nil {
		return
	}
	var view map[string]any
	if keep {
		view = maps.Clone(u.view)
		view[UsePendingField] = false
	}
	for x := u.c; x != nil; x = x.parent {
		if x.hist != nil {
			x.hist.replace(u, view)
		}
	}
}

// keepUse commits the call's use, forgetUse gives it back: the
// reservation's counterparts for history.
func (r *reservation) keepUse()   { r.use.end(true); r.use = nil }
func (r *reservation) forgetUse() { r.use.end(false); r.use = nil }

// checkVarNames refuses a kind declaring a variable the kernel reserves.
func checkVarNames(kind string, vars []string) error {
	for _, v := range vars {
		if reservedVar(v) {
			return fmt.Errorf("kernel: kind %q declares the variable %q, which the kernel reserves", kind, v)
		}
	}
	return nil
}
