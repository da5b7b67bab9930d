package pay

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/egress"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Defaults and bounds of a grant spec.
const (
	DefaultTimeout = 30 * time.Second
	MaxTimeout     = 5 * time.Minute
	MaxPayees      = 64
	// MaxInstrumentLen bounds the instrument token.
	MaxInstrumentLen = 4096
)

// money is an amount in a grant, a narrowing request or a charge: a JSON
// string ("612.00", "800 USD") or a JSON number written with at most two
// decimals (612.5). Numbers are read from their text, never as floats.
type money string

func (m *money) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*m = money(s)
		return nil
	}
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c == '.') {
			return &json.UnmarshalTypeError{Value: "number " + string(b), Type: reflect.TypeFor[money]()}
		}
	}
	*m = money(b)
	return nil
}

// source names where a secret comes from: exactly one of Env and File.
type source struct {
	Env  string `json:"env"`
	File string `json:"file"`
}

// grantSpec is a cap "pay" block as JSON.
type grantSpec struct {
	Provider     *string  `json:"provider"`
	AllowPrivate *bool    `json:"allow_private"`
	Instrument   *source  `json:"instrument"`
	Timeout      *string  `json:"timeout"`
	Payees       []string `json:"payees"`
	Currency     *string  `json:"currency"`
	MaxAmount    *money   `json:"max_amount"`
	Expires      *string  `json:"expires"`
	ApproveAbove *money   `json:"approve_above"`
	Clearance    []string `json:"clearance"`
	// AcceptsUntrusted and RefusesTaints are what a charge refuses of
	// the task's taints (kindapi.Refusal).
	AcceptsUntrusted *bool    `json:"accepts_untrusted"`
	RefusesTaints    []string `json:"refuses_taints"`
}

// narrowReq is a cap_derive request; absent fields keep the parent's.
type narrowReq struct {
	Payees       []string `json:"payees"`
	Currency     *string  `json:"currency"`
	MaxAmount    *money   `json:"max_amount"`
	Expires      *string  `json:"expires"`
	ApproveAbove *money   `json:"approve_above"`
	Clearance    []string `json:"clearance"`
	// AcceptsUntrusted and RefusesTaints are what a charge refuses of
	// the task's taints (kindapi.Refusal).
	AcceptsUntrusted *bool    `json:"accepts_untrusted"`
	RefusesTaints    []string `json:"refuses_taints"`
}

// parseProvider validates the provider's base URL (egress.ParseBaseURL);
// charges go to <provider>/charges.
func parseProvider(s string) (*url.URL, error) { return egress.ParseBaseURL(s, "the instrument") }

// parseExpiry reads an RFC 3339 time or a positive duration from now.
func parseExpiry(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s is neither an RFC 3339 time nor a duration like \"24h\"", kindapi.QuoteTrunc(s))
	}
	if d <= 0 {
		return time.Time{}, fmt.Errorf("duration %s must be positive", kindapi.QuoteTrunc(s))
	}
	return now.Add(d), nil
}

// canonPayees validates, lower-cases, sorts and deduplicates a payee list.
func canonPayees(ps []string) ([]string, error) {
	if len(ps) == 0 {
		return nil, errors.New("must list at least one payee")
	}
	if len(ps) > MaxPayees {
		return nil, fmt.Errorf("%d payees (max %d)", len(ps), MaxPayees)
	}
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		c, err := canonPayee(p)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// grant mints a root scope.
func (k *Kind) grant(g kindapi.GrantContext, spec []byte) (*Scope, error) {
	var sp grantSpec
	if err := kindapi.DecodeSpec("pay", spec, &sp); err != nil {
		return nil, err
	}
	fe := func(field, format string, args ...any) error {
		return &kindapi.FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	now := k.now()
	s := &Scope{timeout: k.defTimeout, maxAmount: MaxMinor, approveAbove: -1}

	if sp.Provider == nil {
		return nil, fe("provider", "required: the payment provider's base URL")
	}
	u, err := parseProvider(*sp.Provider)
	if err != nil {
		return nil, fe("provider", "%v", err)
	}
	s.provider = u.String()
	if sp.AllowPrivate != nil {
		s.allowPrivate = *sp.AllowPrivate
	}
	if !s.allowPrivate {
		if why := egress.HostReason(u.Hostname()); why != "" {
			return nil, fe("provider", "the provider %s is %s; set allow_private = true to allow it", u.Hostname(), why)
		}
	}
	if sp.Instrument == nil {
		return nil, fe("instrument", `required: {"env": VAR} or {"file": PATH} holding the card or account token`)
	}
	if s.instrument, s.source, err = readInstrument(g, *sp.Instrument); err != nil {
		return nil, err
	}
	if sp.Timeout != nil {
		d, err := time.ParseDuration(*sp.Timeout)
		if err != nil || d <= 0 || d > MaxTimeout {
			return nil, fe("timeout", "%s must be a duration in (0, %s]", kindapi.QuoteTrunc(*sp.Timeout), MaxTimeout)
		}
		s.timeout = d
	}
	if sp.Payees == nil {
		return nil, fe("payees", "required: the payees charges may go to")
	}
	if s.payees, err = canonPayees(sp.Payees); err != nil {
		return nil, fe("payees", "%v", err)
	}
	if sp.Currency == nil {
		return nil, fe("currency", "required: one ISO 4217 code, e.g. \"USD\"")
	}
	if s.currency, err = canonCurrency(*sp.Currency); err != nil {
		return nil, fe("currency", "%v", err)
	}
	amt := func(field string, m *money, dst *int64) error {
		if m == nil {
			return nil
		}
		v, _, err := parseMoney(string(*m), s.currency)
		if err != nil {
			return fe(field, "%v", err)
		}
		*dst = v
		return nil
	}
	if err := amt("max_amount", sp.MaxAmount, &s.maxAmount); err != nil {
		return nil, err
	}
	if err := amt("approve_above", sp.ApproveAbove, &s.approveAbove); err != nil {
		return nil, err
	}
	if sp.Clearance != nil {
		s.clearance = kindapi.NewLabel(sp.Clearance, nil)
	}
	if s.refusal, err = kindapi.ParseRefusal(sp.AcceptsUntrusted, sp.RefusesTaints); err != nil {
		return nil, fe("refuses_taints", "%v", err)
	}
	if sp.Expires != nil {
		if s.expires, err = parseExpiry(*sp.Expires, now); err != nil {
			return nil, fe("expires", "%v", err)
		}
	}
	s.keys = newTree(g)
	return s, nil
}

// readInstrument reads the instrument token. Errors name the variable or
// file, never the value.
func readInstrument(g kindapi.GrantContext, src source) (kindapi.Secret, string, error) {
	raw, where, err := g.ReadSecret(kindapi.SecretSource{Env: src.Env, File: src.File}, "the instrument")
	if err != nil {
		return kindapi.Secret{}, "", kindapi.Prefixed("instrument", err)
	}
	field := "instrument.env"
	if src.Env == "" {
		field = "instrument.file"
	}
	if len(raw) > MaxInstrumentLen {
		return kindapi.Secret{}, "", &kindapi.FieldError{Field: field, Msg: fmt.Sprintf("the instrument is longer than %d bytes", MaxInstrumentLen)}
	}
	for _, c := range []byte(raw) {
		if c < 0x20 || c == 0x7f {
			return kindapi.Secret{}, "", &kindapi.FieldError{Field: field, Msg: "the instrument has a control character"}
		}
	}
	return kindapi.NewSecret(raw), where, nil
}

// narrow returns the scope req asks for within parent: EINVAL for a
// malformed request, EDENIED naming every field that would widen parent.
// The child gets a new ledger node under the parent's, so everything it
// charges also counts against the parent (and its ancestors).
func (k *Kind) narrow(parent *Scope, req []byte) (*Scope, error) {
	var r narrowReq
	if err := kindapi.DecodeNarrow("pay", req, &r); err != nil {
		return nil, err
	}
	inval := func(field, format string, args ...any) error {
		return kindapi.Errorf(abi.EINVAL, "pay: narrowing request: %s: %s", field, fmt.Sprintf(format, args...))
	}
	child := *parent
	var widen []string

	if r.Payees != nil {
		ps, err := canonPayees(r.Payees)
		if err != nil {
			return nil, inval("payees", "%v", err)
		}
		var extra []string
		for _, p := range ps {
			if _, ok := slices.BinarySearch(parent.payees, p); !ok {
				extra = append(extra, p)
			}
		}
		if extra != nil {
			widen = append(widen, fmt.Sprintf("payees %v not in %v", extra, parent.payees))
		}
		child.payees = ps
	}
	if r.Currency != nil {
		c, err := canonCurrency(*r.Currency)
		if err != nil {
			return nil, inval("currency", "%v", err)
		}
		if c != parent.currency {
			widen = append(widen, fmt.Sprintf("currency %s is not the capability's %s", c, parent.currency))
		}
	}
	// limit narrows an amount field; parentV < 0 means the parent has no
	// such limit, so any value narrows it.
	limit := func(field string, m *money, parentV int64, dst *int64) error {
		if m == nil {
			return nil
		}
		v, _, err := parseMoney(string(*m), parent.currency)
		if err != nil {
			if strings.Contains(err.Error(), " is in ") {
				widen = append(widen, fmt.Sprintf("%s: %v", field, err))
				return nil
			}
			return inval(field, "%v", err)
		}
		if parentV >= 0 && v > parentV {
			widen = append(widen, fmt.Sprintf("%s %s exceeds %s", field, formatMinor(v), formatMinor(parentV)))
		}
		*dst = v
		return nil
	}
	if err := limit("max_amount", r.MaxAmount, parent.maxAmount, &child.maxAmount); err != nil {
		return nil, err
	}
	if err := limit("approve_above", r.ApproveAbove, parent.approveAbove, &child.approveAbove); err != nil {
		return nil, err
	}
	if r.Clearance != nil {
		c := kindapi.NewLabel(r.Clearance, nil)
		if !c.CanFlowTo(parent.clearance) {
			widen = append(widen, fmt.Sprintf("clearance %v exceeds %v", c.Conf(), parent.clearance.Conf()))
		}
		child.clearance = c
	}
	refusal, drops, err := parent.refusal.Narrow(r.AcceptsUntrusted, r.RefusesTaints)
	if err != nil {
		return nil, inval("refuses_taints", "%v", err)
	}
	child.refusal, widen = refusal, append(widen, drops...)
	if r.Expires != nil {
		e, err := parseExpiry(*r.Expires, k.now())
		if err != nil {
			return nil, inval("expires", "%v", err)
		}
		if !parent.expires.IsZero() && e.After(parent.expires) {
			widen = append(widen, fmt.Sprintf("expires %s is after %s",
				e.UTC().Format(time.RFC3339), parent.expires.UTC().Format(time.RFC3339)))
		}
		child.expires = e
	}
	if widen != nil {
		return nil, kindapi.Errorf(abi.EDENIED, "pay: narrowing would widen the capability: %s", strings.Join(widen, "; "))
	}
	child.payees = slices.Clone(child.payees)
	return &child, nil
}
