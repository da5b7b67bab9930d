package pay

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Scope is what a pay capability allows: charges in one currency to some
// payees through one provider with one instrument, each at most
// max_amount, until an expiry, with approval above a threshold. A budget
// and a number of uses shared with every capability derived from it are
// the kernel's (budget and max_uses on any grant; kernel/allowance.go),
// read in this kind's unit (Kind.Info().Amounts: minor units of the
// scope's currency).
//
// The limits are immutable once minted. The scope also points at the
// idempotency keys its whole derivation tree shares.
type Scope struct {
	provider     string // canonical URL, no trailing slash
	allowPrivate bool
	instrument   kindapi.Secret
	source       string // where the instrument was read: "env:NAME" or "file:PATH"
	timeout      time.Duration

	payees       []string // sorted, deduplicated, lower case
	currency     string   // upper case
	maxAmount    int64    // minor units; MaxMinor when the grant names none
	expires      time.Time
	approveAbove int64           // minor units; -1: never ask
	clearance    kindapi.Label   // confidentiality a charge may carry to the provider
	refusal      kindapi.Refusal // taints a charging task may not carry (accepts_untrusted, refuses_taints)

	keys *tree
}

var _ kindapi.Scope = (*Scope)(nil)

// Provider returns the provider's base URL.
func (s *Scope) Provider() string { return s.provider }

// Payees returns the allowed payees, sorted.
func (s *Scope) Payees() []string { return slices.Clone(s.payees) }

// Currency returns the currency code.
func (s *Scope) Currency() string { return s.currency }

// MaxAmount returns the largest single charge, in minor units.
func (s *Scope) MaxAmount() int64 { return s.maxAmount }

// Expires returns when the capability expires; the zero time for never.
func (s *Scope) Expires() time.Time { return s.expires }

// Clearance is the sink's clearance: a charge sends its details to the
// provider, so the charging task's label must flow to this (public data
// only unless the grant says otherwise).
func (s *Scope) Clearance() kindapi.Label { return s.clearance }

// ApproveAbove returns the amount above which a charge needs approval, in
// minor units, or -1 for never.
func (s *Scope) ApproveAbove() int64 { return s.approveAbove }

type scopeJSON struct {
	Provider     string   `json:"provider"`
	AllowPrivate bool     `json:"allow_private"`
	Instrument   string   `json:"instrument"`
	Timeout      string   `json:"timeout"`
	Payees       []string `json:"payees"`
	Currency     string   `json:"currency"`
	MaxAmount    string   `json:"max_amount"`
	Expires      *string  `json:"expires"`
	ApproveAbove *string  `json:"approve_above"`
	Clearance    []string `json:"clearance"`
	// AcceptsUntrusted is shown only when false, RefusesTaints only when
	// set: a scope refusing nothing renders as before.
	AcceptsUntrusted *bool    `json:"accepts_untrusted,omitempty"`
	RefusesTaints    []string `json:"refuses_taints,omitempty"`
}

// MarshalJSON renders the scope without the instrument (only where it was
// read from):
//
//	{"provider":"https://pay.example","allow_private":false,
//	 "instrument":"env:CARD_TOKEN","timeout":"30s","payees":["airline.example"],
//	 "currency":"USD","max_amount":"800.00 USD",
//	 "expires":"2026-12-01T00:00:00Z","approve_above":"500.00 USD"}
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
		MaxAmount: *money(s.maxAmount), ApproveAbove: money(s.approveAbove),
		Clearance: s.clearance.Conf(),
	}
	if j.Clearance == nil {
		j.Clearance = []string{}
	}
	if !s.refusal.AcceptsUntrusted() {
		f := false
		j.AcceptsUntrusted = &f
	}
	j.RefusesTaints = s.refusal.Taints().List()
	if j.Payees == nil {
		j.Payees = []string{}
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

// Contains reports whether every charge other allows, s allows: same
// provider and instrument, private addresses only if s allows them, payees
// a subset, same currency, max_amount and expiry no larger (a limit s has,
// other must have too), approval at or below s's threshold (if s asks),
// and the same idempotency keys (one derivation tree).
func (s *Scope) Contains(o kindapi.Scope) bool {
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
	if !within(s.approveAbove, other.approveAbove) {
		return false
	}
	if !s.expires.IsZero() && (other.expires.IsZero() || other.expires.After(s.expires)) {
		return false
	}
	if !other.clearance.CanFlowTo(s.clearance) || !other.refusal.Within(s.refusal) {
		return false
	}
	return other.keys != nil && other.keys == s.keys
}
