package kernel

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Uses and totals (law 5: budgets are debited in the kernel, across the
// whole derivation subtree). Any capability may carry max_uses, the most
// effects it and everything derived from it may have; a capability of a
// kind whose calls carry an amount (Info.Amounts) may also carry a budget,
// the most they may spend together. Both are reserved before a call is
// decided and committed only when its effect happened: a refused call, or
// an effect that did not leave the kernel (kindapi.NotPerformed), counts
// nothing.

// allowance is the uses and budget of one capability.
type allowance struct {
	maxUses int64 // 0: no bound of its own
	budget  int64 // 0: no bound of its own

	mu    sync.Mutex
	uses  int64 // committed and reserved; protected by mu
	spent int64 // committed and reserved; protected by mu
}

// reserveAllowance takes one use and amount from every allowance on c's
// chain, all or none. Locks are taken root first, as takeRate does, so
// concurrent calls on one subtree cannot deadlock.
func reserveAllowance(c *Cap, amount int64) error {
	var local [8]*allowance // no allocation for chains of up to 8
	chain := local[:0]
	for x := c; x != nil; x = x.parent {
		if x.allow != nil {
			chain = append(chain, x.allow)
		}
	}
	for i := len(chain) - 1; i >= 0; i-- {
		chain[i].mu.Lock()
	}
	defer func() {
		for _, a := range chain {
			a.mu.Unlock()
		}
	}()
	for i, a := range chain {
		note := ""
		if i > 0 {
			note = " (on an ancestor capability, shared with its whole subtree)"
		}
		if a.maxUses > 0 && a.uses+1 > a.maxUses {
			return kindapi.Errorf(abi.ELIMIT, "all %d uses spent%s", a.maxUses, note)
		}
		if a.budget > 0 && amount > 0 && a.spent+amount > a.budget {
			return kindapi.Errorf(abi.ELIMIT, "budget exhausted: %s of %s spent, %s more requested%s",
				c.formatAmount(a.spent), c.formatAmount(a.budget), c.formatAmount(amount), note)
		}
	}
	for _, a := range chain {
		a.uses++
		a.spent += amount
	}
	return nil
}

// releaseAllowance gives back what reserveAllowance took on c's chain (the
// chain is immutable: walking it again finds the same allowances).
func releaseAllowance(c *Cap, amount int64) {
	for x := c; x != nil; x = x.parent {
		if a := x.allow; a != nil {
			a.mu.Lock()
			a.uses--
			a.spent -= amount
			a.mu.Unlock()
		}
	}
}

// refundAmount gives back n of the amount reserved on c's chain, keeping
// the use: the effect spent less than it reserved.
func refundAmount(c *Cap, n int64) {
	for x := c; x != nil; x = x.parent {
		if a := x.allow; a != nil {
			a.mu.Lock()
			a.spent -= n
			a.mu.Unlock()
		}
	}
}

// Usage is what a capability's subtree has used of its own max_uses and
// budget (0 limits: none set on it).
type Usage struct {
	Uses, MaxUses int64
	Spent, Budget int64
}

// Usage reports the uses and spending of c's subtree against c's own
// limits; ok is false when c carries neither.
func (c *Cap) Usage() (u Usage, ok bool) {
	a := c.allow
	if a == nil {
		return Usage{}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return Usage{Uses: a.uses, MaxUses: a.maxUses, Spent: a.spent, Budget: a.budget}, true
}

// Allowance is a grant's max_uses and budget, 0 for none.
type Allowance struct {
	MaxUses int64
	Budget  int64
}

func (a Allowance) isZero() bool { return a.MaxUses == 0 && a.Budget == 0 }

func newAllowance(a Allowance) *allowance {
	if a.isZero() {
		return nil
	}
	return &allowance{maxUses: a.MaxUses, budget: a.Budget}
}

// effectiveLimits returns the tightest max_uses and budget on c's chain.
func effectiveLimits(c *Cap) Allowance {
	var out Allowance
	for x := c; x != nil; x = x.parent {
		if x.allow == nil {
			continue
		}
		if m := x.allow.maxUses; m > 0 && (out.MaxUses == 0 || m < out.MaxUses) {
			out.MaxUses = m
		}
		if b := x.allow.budget; b > 0 && (out.Budget == 0 || b < out.Budget) {
			out.Budget = b
		}
	}
	return out
}

// ParseBudget reads a budget for a grant of the named kind, in that kind's
// unit for scope s. Kinds whose calls carry no amount have no budget.
func (k *Kernel) ParseBudget(kind string, s kindapi.Scope, text string) (int64, error) {
	r, ok := k.kinds[kind]
	if !ok {
		return 0, fmt.Errorf("unknown capability kind %q", kind)
	}
	return kindapi.ParseBudget(r.kind, s, text)
}

// splitAllowanceReq removes "max_uses" and "budget" from a derive request
// and returns the allowance they ask for, checked against parent's chain:
// a request for more than an ancestor allows is refused (law 3), never
// clamped.
func (k *Kernel) splitAllowanceReq(parent *Cap, scope kindapi.Scope, m map[string]json.RawMessage) (Allowance, error) {
	var a Allowance
	lim := effectiveLimits(parent)
	if raw, ok := m["max_uses"]; ok {
		delete(m, "max_uses")
		if err := json.Unmarshal(raw, &a.MaxUses); err != nil || a.MaxUses < 1 {
			return a, kindapi.Errorf(abi.EINVAL, "max_uses must be a whole number of at least 1")
		}
		if lim.MaxUses > 0 && a.MaxUses > lim.MaxUses {
			return a, kindapi.Errorf(abi.EDENIED, "max_uses %d exceeds the %d allowed", a.MaxUses, lim.MaxUses)
		}
	}
	if raw, ok := m["budget"]; ok {
		delete(m, "budget")
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return a, kindapi.Errorf(abi.EINVAL, "budget must be a string such as \"50.00\"")
		}
		n, err := k.ParseBudget(parent.kind.Name(), scope, text)
		if err != nil {
			return a, kindapi.Errorf(abi.EINVAL, "%v", err)
		}
		if lim.Budget > 0 && n > lim.Budget {
			return a, kindapi.Errorf(abi.EDENIED, "budget %s exceeds the %s allowed", parent.formatAmount(n), parent.formatAmount(lim.Budget))
		}
		a.Budget = n
	}
	return a, nil
}

// formatAmount shows n in c's kind's unit.
func (c *Cap) formatAmount(n int64) string {
	if c.reg != nil && c.reg.info.Amounts != nil {
		return c.reg.info.Amounts.FormatAmount(c.scope, n)
	}
	return fmt.Sprint(n)
}
