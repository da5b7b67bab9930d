package pay

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/mandatevm/mandate/kernel"
)

// Scope is what a pay capability allows: charges in one currency to some
// payees through one provider with one instrument, each at most
// max_amount, within a budget and a number of uses shared with every scope
// derived from it, until an expiry, with approval above a threshold.
//
// The limits are immutable once minted. The scope also points at its own
// ledger node, linked to its parent's, where charges are debited.
type Scope struct {
	provider     string // canonical URL, no trailing slash
	allowPrivate bool
	instrument   kernel.Secret
	source       string // where the instrument was read: "env:NAME" or "file:PATH"
	timeout      time.Duration

	payees       []string // sorted, deduplicated, lower case
	currency     string   // upper case
	maxAmount    int64    // minor units; MaxMinor when the grant names none
	budget       int64    // minor units; -1: none
	maxUses      int64    // -1: none
	expires      time.Time
	approveAbove int64        // minor units; -1: never ask
	clearance    kernel.Label // confidentiality a charge may carry to the provider

	ledger *ledger
}

var _ kernel.Scope = (*Scope)(nil)

// Provider returns the provider's base URL.
func (s *Scope) Provider() string { return s.provider }

// Payees returns the allowed payees, sorted.
func (s *Scope) Payees() []string { return slices.Clone(s.payees) }

// Currency returns the currency code.
func (s *Scope) Currency() string { return s.currency }

// MaxAmount returns the largest single charge, in minor units.
func (s *Scope) MaxAmount() int64 { return s.maxAmount }

// Budget returns the total this capability and everything derived from it
// may charge, in minor units, or -1 for none.
func (s *Scope) Budget() int64 { return s.budget }

// MaxUses returns how many charges this capability and everything derived
// from it may make, or -1 for no limit.
func (s *Scope) MaxUses() int64 { return s.maxUses }

// Expires returns when the capability expires; the zero time for never.
func (s *Scope) Expires() time.Time { return s.expires }

// SinkClearance implements kernel.Sink: a charge sends its details to the
// provider, so the charging task's label must flow to this (public data
// only unless the grant says otherwise).
func (s *Scope) SinkClearance() (kernel.Label, bool) { return s.clearance, true }

// ApproveAbove returns the amount above which a charge needs approval, in
// minor units, or -1 for never.
func (s *Scope) ApproveAbove() int64 { return s.approveAbove }

// Spent returns what this capability and everything derived from it have
// charged (including charges in flight), in minor units, and how many
// charges.
func (s *Scope) Spent() (amount, uses int64) { return s.ledger.totals() }

type scopeJSON struct {
	Provider     string   `json:"provider"`
	AllowPrivate bool     `json:"allow_private"`
	Instrument   string   `json:"instrument"`
	Timeout      string   `json:"timeout"`
	Payees       []string `json:"payees"`
	Currency     string   `json:"currency"`
	MaxAmount    string   `json:"max_amount"`
	Budget       *string  `json:"budget"`
	MaxUses      *int64   `json:"max_uses"`
	Expires      *string  `json:"expires"`
	ApproveAbove *string  `json:"approve_above"`
	Clearance    []string `json:"clearance"`
}

// MarshalJSON renders the scope without the instrument (only where it was
// read from):
//
//	{"provider":"https://pay.example","allow_private":false,
//	 "instrument":"env:CARD_TOKEN","timeout":"30s","payees":["airline.example"],
//	 "currency":"USD","max_amount":"800.00 USD","budget":"1000.00 USD",
//	 "max_uses":3,"expires":"2026-12-01T00:00:00Z","approve_above":"500.00 USD"}
//
// Absent limits are null.
func (s *Scope) MarshalJSON() ([]byte, error) {
	money := func(v int64) *string {
		if v < 0 {
			return nil
		}
		m := formatMinor(v) + " " + s.currency
		return &m
	}
	j := scopeJSON{
		Provider: s.provider, AllowPrivate: s.allowPrivate, Instrument: s.source,
		Timeout: s.timeout.String(), Payees: slices.Clone(s.payees), Currency: s.currency,
		MaxAmount: *money(s.maxAmount), Budget: money(s.budget), ApproveAbove: money(s.approveAbove),
		Clearance: s.clearance.Conf(),
	}
	if j.Clearance == nil {
		j.Clearance = []string{}
	}
	if j.Payees == nil {
		j.Payees = []string{}
	}
	if s.maxUses >= 0 {
		n := s.maxUses
		j.MaxUses = &n
	}
	if !s.expires.IsZero() {
		e := s.expires.UTC().Format(time.RFC3339Nano)
		j.Expires = &e
	}
	return json.Marshal(j)
}

// String renders the scope's JSON form: printing a scope never shows the
// instrument.
func (s *Scope) String() string {
	b, err := s.MarshalJSON()
	if err != nil {
		return "pay.Scope{?}"
	}
	return string(b)
}

// GoString is String.
func (s *Scope) GoString() string { return s.String() }

// Contains reports whether every charge other allows, s allows, and
// whether other's spending is counted against s: same provider and
// instrument, private addresses only if s allows them, payees a subset,
// same currency, max_amount, budget, max_uses and expiry no larger (a limit
// s has, other must have too), approval at or below s's threshold (if s
// asks), and other's ledger is s's or lies below it in the same tree.
func (s *Scope) Contains(o kernel.Scope) bool {
	other, ok := o.(*Scope)
	if !ok || s == nil || other == nil {
		return false
	}
	if other.provider != s.provider || !other.instrument.Equal(s.instrument) ||
		(other.allowPrivate && !s.allowPrivate) || other.timeout > s.timeout {
		return false
	}
	for _, p := range other.payees {
		if _, ok := slices.BinarySearch(s.payees, p); !ok {
			return false
		}
	}
	if other.currency != s.currency || other.maxAmount > s.maxAmount {
		return false
	}
	within := func(sv, ov int64) bool { return sv < 0 || (ov >= 0 && ov <= sv) }
	if !within(s.budget, other.budget) || !within(s.maxUses, other.maxUses) || !within(s.approveAbove, other.approveAbove) {
		return false
	}
	if !s.expires.IsZero() && (other.expires.IsZero() || other.expires.After(s.expires)) {
		return false
	}
	if !other.clearance.CanFlowTo(s.clearance) {
		return false
	}
	return other.ledger != nil && s.ledger != nil && other.ledger.within(s.ledger)
}
