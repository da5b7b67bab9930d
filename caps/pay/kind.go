package pay

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/caps/internal/httpservice"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// KindName is the name the kind registers under.
const KindName = "pay"

// ChargeOp is the kind's only operation.
const ChargeOp = "charge"

// Bounds on a charge's arguments and the provider's answer.
const (
	MaxOfferBytes       = 16 << 10
	MaxDescriptionLen   = 1024
	MaxKeyLen           = 255
	MaxProviderResponse = 64 << 10
)

// Kind is the pay capability kind. It is safe for concurrent use. Make one
// with New.
type Kind struct {
	now        func() time.Time
	defTimeout time.Duration
	clients    *httpservice.Clients
}

var _ kindapi.Kind = (*Kind)(nil)

// Option configures a Kind.
type Option func(*Kind)

// WithClock makes the kind read the time from now (tests of expiry).
func WithClock(now func() time.Time) Option { return func(k *Kind) { k.now = now } }

// WithDefaultTimeout sets the provider timeout of grants that name none
// (default DefaultTimeout); values outside (0, MaxTimeout] are ignored.
func WithDefaultTimeout(d time.Duration) Option {
	return func(k *Kind) {
		if d > 0 && d <= MaxTimeout {
			k.defTimeout = d
		}
	}
}

// New returns the pay kind.
func New(opts ...Option) *Kind {
	k := &Kind{now: time.Now, defTimeout: DefaultTimeout}
	for _, o := range opts {
		o(k)
	}
	// The shell of kinds that call a service (caps/internal/httpservice),
	// on the one egress guard (internal/egress): resolve once, refuse
	// non-public addresses unless allowPrivate, dial only the checked
	// address. A refusal stays an *egress.Denied (errors.As) and reads
	// "pay: provider address A is R and allow_private is false".
	redirect := errors.New("pay: the provider redirected; charges are never re-sent elsewhere")
	k.clients = httpservice.NewClients("pay: provider", redirect)
	return k
}

// Name returns "pay".
func (k *Kind) Name() string { return KindName }

// Info implements kindapi.Kind: one operation, charge; constraints see
// charge and offer; amounts are minor units of the scope's currency, so a
// budget reads "1000.00" or "1000.00 USD".
func (k *Kind) Info() kindapi.Info {
	return kindapi.Info{Ops: []string{ChargeOp}, Vars: vars, Amounts: minorUnits{}}
}

// minorUnits reads and shows amounts in a scope's currency.
type minorUnits struct{}

func (minorUnits) ParseAmount(sc kindapi.Scope, text string) (int64, error) {
	s, err := kindapi.ScopeAs[*Scope](sc, KindName)
	if err != nil {
		return 0, err
	}
	v, _, err := parseMoney(text, s.currency)
	return v, err
}

func (minorUnits) FormatAmount(sc kindapi.Scope, n int64) string {
	s, err := kindapi.ScopeAs[*Scope](sc, KindName)
	if err != nil {
		return formatMinor(n)
	}
	return formatMinor(n) + " " + s.currency
}

// Describe implements kindapi.Kind.
func (k *Kind) Describe(sc kindapi.Scope) kindapi.Description {
	s, err := kindapi.ScopeAs[*Scope](sc, KindName)
	if err != nil {
		return kindapi.Description{}
	}
	money := func(v int64) string { return formatMinor(v) + " " + s.currency }
	d := kindapi.Description{
		Fields: []kindapi.Detail{
			{Name: "provider", Value: s.provider},
			{Name: "instrument", Value: s.source},
			{Name: "payees", Value: strings.Join(s.payees, ", ")},
			{Name: "currency", Value: s.currency},
		},
		Sink:    s.refusal.Sink(s.clearance),
		Reaches: []string{s.provider},
	}
	if s.keys != nil && s.keys.seeded {
		d.Repeatable = true
	} else {
		d.NotRepeatable = "its idempotency keys are not derived from the run (no seed: a run outside a fleet)"
	}
	if s.maxAmount != MaxMinor {
		d.Fields = append(d.Fields, kindapi.Detail{Name: "max_amount", Value: money(s.maxAmount)})
	}
	if s.approveAbove >= 0 {
		d.Fields = append(d.Fields, kindapi.Detail{Name: "approve_above", Value: money(s.approveAbove)})
	}
	if !s.expires.IsZero() {
		d.Fields = append(d.Fields, kindapi.Detail{Name: "expires", Value: s.expires.UTC().Format(time.RFC3339)})
	}
	if s.allowPrivate {
		d.Fields = append(d.Fields, kindapi.Detail{Name: "allow_private", Value: "true"})
	}
	d.Fields = append(d.Fields, kindapi.Detail{Name: "timeout", Value: s.timeout.String()})
	if c := s.clearance.Conf(); len(c) > 0 {
		d.Fields = append(d.Fields, kindapi.Detail{Name: "clearance", Value: strings.Join(c, ", ")})
	}
	d.Fields = append(d.Fields, s.refusal.Details()...)
	return d
}

// Grant mints a root scope from a cap "pay" block (see the package
// documentation). Errors are *kindapi.FieldError when they concern one
// field.
func (k *Kind) Grant(g kindapi.GrantContext, spec []byte) (kindapi.Scope, error) {
	return kindapi.AsScope(k.grant(g, spec))
}

// Narrow returns the scope req asks for within parent. A malformed request
// is EINVAL; one that would widen parent is EDENIED naming what widened.
func (k *Kind) Narrow(parent kindapi.Scope, req []byte) (kindapi.Scope, error) {
	p, err := kindapi.ScopeAs[*Scope](parent, "pay")
	if err != nil {
		return nil, err
	}
	return kindapi.AsScope(k.narrow(p, req))
}

// CloseIdleConnections closes pooled provider connections.
func (k *Kind) CloseIdleConnections() { k.clients.CloseIdleConnections() }

// chargeArgs is the argument document of "charge".
type chargeArgs struct {
	Payee          *string         `json:"payee"`
	Amount         *money          `json:"amount"`
	Currency       *string         `json:"currency"`
	IdempotencyKey string          `json:"idempotency_key"`
	Description    string          `json:"description"`
	Offer          json.RawMessage `json:"offer"`
}

// Receipt is the JSON document a successful charge returns.
type Receipt struct {
	ChargeID       string `json:"charge_id"`
	Amount         string `json:"amount"`
	Currency       string `json:"currency"`
	Payee          string `json:"payee"`
	IdempotencyKey string `json:"idempotency_key"`
	Status         string `json:"status"`
}

// ProviderRequest is the body of POST <provider>/charges.
type ProviderRequest struct {
	AmountMinor    int64           `json:"amount_minor"`
	Currency       string          `json:"currency"`
	Payee          string          `json:"payee"`
	Instrument     string          `json:"instrument"`
	IdempotencyKey string          `json:"idempotency_key"`
	Description    string          `json:"description,omitempty"`
	Details        json.RawMessage `json:"details,omitempty"`
}

// ProviderResponse is the provider's answer to a successful charge.
type ProviderResponse struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// Prepare prepares "charge": the arguments are decoded and checked
// against the scope (expiry, payee, currency, max_amount), and the kernel
// is told the amount (debited from every budget on the chain), whether the
// person must approve (above approve_above) and what they are shown. The
// effect claims the idempotency key and posts the charge. See the package
// documentation for each errno.
func (k *Kind) Prepare(call *kindapi.Call) (kindapi.Op, error) {
	if call.Op != ChargeOp {
		return kindapi.Op{}, kindapi.Errorf(abi.ENOTSUP, "pay: no operation %q", call.Op)
	}
	s, err := kindapi.ScopeAs[*Scope](call.Scope, KindName)
	if err != nil {
		return kindapi.Op{}, err
	}
	if s.keys == nil {
		return kindapi.Op{}, kindapi.Errorf(abi.EINTERNAL, "pay: scope has no idempotency keys")
	}
	// 1. Decode.
	var a chargeArgs
	if err := abi.DecodeJSON(call.Args, &a); err != nil {
		if errors.Is(err, abi.ErrTooLarge) {
			return kindapi.Op{}, kindapi.Errorf(abi.ELIMIT, "pay: charge: %v", err)
		}
		return kindapi.Op{}, kindapi.Errorf(abi.EINVAL, "pay: charge: %v", err)
	}
	inval := func(format string, args ...any) error {
		return kindapi.Errorf(abi.EINVAL, "pay: charge: "+format, args...)
	}
	if a.Payee == nil || a.Amount == nil || a.Currency == nil {
		return kindapi.Op{}, inval("payee, amount and currency are required")
	}
	payee, err := canonPayee(*a.Payee)
	if err != nil {
		return kindapi.Op{}, inval("%v", err)
	}
	currency, err := canonCurrency(*a.Currency)
	if err != nil {
		return kindapi.Op{}, inval("%v", err)
	}
	amount, err := parseDecimal(string(*a.Amount))
	if err != nil {
		return kindapi.Op{}, inval("%v", err)
	}
	if amount == 0 {
		return kindapi.Op{}, inval("amount must be positive")
	}
	if len(a.Description) > MaxDescriptionLen {
		return kindapi.Op{}, kindapi.Errorf(abi.ELIMIT, "pay: charge: description of %d bytes (max %d)", len(a.Description), MaxDescriptionLen)
	}
	if len(a.Offer) > MaxOfferBytes {
		return kindapi.Op{}, kindapi.Errorf(abi.ELIMIT, "pay: charge: offer of %d bytes (max %d)", len(a.Offer), MaxOfferBytes)
	}
	var offer map[string]any
	if len(a.Offer) > 0 && string(a.Offer) != "null" {
		if err := json.Unmarshal(a.Offer, &offer); err != nil || offer == nil {
			return kindapi.Op{}, inval("offer must be a JSON object")
		}
	}
	key := a.IdempotencyKey
	if key == "" {
		key = s.keys.autoKey()
	} else if err := checkKey(key); err != nil {
		return kindapi.Op{}, inval("%v", err)
	}
	summary := fmt.Sprintf("charge %s %s to %s", formatMinor(amount), currency, payee)

	// 2. Expiry.
	if !s.expires.IsZero() && !k.now().Before(s.expires) {
		return kindapi.Op{}, kindapi.Errorf(abi.EEXPIRED, "pay: the capability expired at %s", s.expires.UTC().Format(time.RFC3339))
	}
	// 3-5. Scope.
	if !containsSorted(s.payees, payee) {
		return kindapi.Op{}, kindapi.Errorf(abi.EDENIED, "pay: payee %s is not allowed (allowed: %v)", payee, s.payees)
	}
	if currency != s.currency {
		return kindapi.Op{}, kindapi.Errorf(abi.EDENIED, "pay: currency %s is not the capability's %s", currency, s.currency)
	}
	if amount > s.maxAmount {
		return kindapi.Op{}, kindapi.Errorf(abi.EDENIED, "pay: %s exceeds the maximum charge of %s %s", summary, formatMinor(s.maxAmount), s.currency)
	}
	log := call.Logger
	op := kindapi.Op{
		Sink: s.refusal.Sink(s.clearance),
		Vars: func() (map[string]any, error) {
			return chargeVars(payee, currency, amount, a.Description, a.IdempotencyKey, a.Offer)
		},
		Amount: amount,
		Show: func() kindapi.Preview {
			d := []kindapi.Detail{
				{Name: "payee", Value: payee}, {Name: "amount", Value: formatMinor(amount)}, {Name: "currency", Value: currency},
				{Name: "provider", Value: s.provider}, {Name: "idempotency_key", Value: key},
			}
			if a.Description != "" {
				d = append(d, kindapi.Detail{Name: "description", Value: a.Description})
			}
			if offer != nil {
				d = append(d, kindapi.Detail{Name: "offer", Value: string(a.Offer)})
			}
			return kindapi.Preview{Summary: summary, Details: d}
		},
	}
	// 6. A charge already made under this key is replayed, free. A key
	// used for another charge is refused here.
	state, rec, err := s.keys.peek(key, payee, currency, amount)
	if err != nil {
		return kindapi.Op{}, err
	}
	replay := func(ctx context.Context, rec []byte) (*kindapi.Result, error) {
		log.Info("pay: idempotent replay", "idempotency_key", key, "payee", payee, "amount", formatMinor(amount), "currency", currency)
		return &kindapi.Result{Data: bytes.Clone(rec)}, nil
	}
	if state == keyDone {
		op.Free, op.Amount = true, 0
		op.Effect = func(ctx context.Context) (*kindapi.Result, error) { return replay(ctx, rec) }
		return op, nil
	}
	// 7. Approval above the threshold (the kernel asks, showing op.Show).
	if s.approveAbove >= 0 && amount > s.approveAbove {
		op.NeedsApproval = fmt.Sprintf("the amount is above approve_above %s %s", formatMinor(s.approveAbove), s.currency)
	}
	// 8. The key, claimed at the kernel's reserve step: one charge per
	// key in the whole tree. A call that finds the key being charged by
	// another spends nothing and replays that charge's receipt.
	var own *claimed
	op.Reserve = func() (func(), bool, error) {
		e, st, err := s.keys.tryClaim(key, payee, currency, amount)
		if err != nil {
			return nil, false, err
		}
		if e == nil {
			return nil, st != keyFree, nil
		}
		own = &claimed{t: s.keys, key: key, e: e}
		// A retry of a charge whose outcome was unknown was debited then.
		return func() { own.finish(nil, st == keyUnknown) }, st == keyUnknown, nil
	}
	// 9. The provider.
	op.Effect = func(ctx context.Context) (*kindapi.Result, error) {
		if own == nil {
			rec, err := s.keys.await(ctx, key)
			if err != nil {
				return nil, err
			}
			res, err := replay(ctx, rec)
			if res != nil {
				res.Outcome = "no new charge: replayed the charge another call made under the same idempotency key"
			}
			return res, err
		}
		return k.charge(ctx, s, log, own, a, payee, currency, amount, offer != nil)
	}
	// A charge is an effect to list with the run's: the amount and payee,
	// and the description the task wrote.
	op.Account = func() kindapi.Account {
		acc := kindapi.Account{Action: summary}
		if a.Description != "" {
			acc.Written = " " + strconv.Quote(a.Description)
		}
		return acc
	}
	return op, nil
}

// charge is the effect of a prepared charge whose key this call owns.
func (k *Kind) charge(ctx context.Context, s *Scope, log hclog.Logger, own *claimed, a chargeArgs, payee, currency string, amount int64, hasOffer bool) (*kindapi.Result, error) {
	var out []byte
	unknown := false
	defer func() { own.finish(out, unknown) }()
	key := own.key
	pr := ProviderRequest{
		AmountMinor: amount, Currency: currency, Payee: payee, Instrument: s.instrument.Value(),
		IdempotencyKey: "mandate-" + s.keys.id + "-" + key, Description: a.Description,
	}
	if hasOffer {
		pr.Details = a.Offer
	}
	resp, err := k.post(ctx, s, pr)
	if err != nil {
		// Sent without a definite answer: the charge may have happened. The
		// key is kept so that a retry neither charges twice (the provider
		// dedups by key) nor debits twice.
		var np interface{ Unwrap() error }
		unknown = kindapi.ErrnoOf(err) == abi.ETIMEDOUT || (kindapi.ErrnoOf(err) == abi.EIO && !errors.As(err, &np))
		return nil, err
	}
	rec, err := json.Marshal(Receipt{
		ChargeID: resp.ID, Amount: formatMinor(amount), Currency: currency, Payee: payee,
		IdempotencyKey: key, Status: resp.Status,
	})
	if err != nil {
		return nil, err
	}
	out = rec
	log.Info("pay: charged", "charge_id", resp.ID, "payee", payee, "amount", formatMinor(amount),
		"currency", currency, "idempotency_key", key)
	return &kindapi.Result{Data: bytes.Clone(rec),
		Outcome: fmt.Sprintf("charged %s %s to %s (id %s, %s)", formatMinor(amount), currency, payee, resp.ID, resp.Status)}, nil
}

// post sends a charge to the provider. Errors never quote the provider's
// body: it might echo the instrument.
func (k *Kind) post(ctx context.Context, s *Scope, pr ProviderRequest) (ProviderResponse, error) {
	body, err := json.Marshal(pr)
	if err != nil {
		return ProviderResponse{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := httpservice.NewJSONRequest(ctx, s.provider+"/charges", body)
	if err != nil {
		return ProviderResponse{}, kindapi.Errorf(abi.EIO, "pay: provider request: %v", err)
	}
	req.Header.Set("Idempotency-Key", pr.IdempotencyKey)
	// A refused address or an unreachable provider: nothing was sent. A
	// transport timeout reads as the provider not answering in time.
	f := httpservice.Failure{What: "pay", Peer: "provider", Other: "pay: provider",
		Secret: s.instrument, Timeout: s.timeout, NetTimeouts: true}
	resp, err := k.clients.For(s.allowPrivate).Do(req)
	if err != nil {
		return ProviderResponse{}, f.Of(ctx, err)
	}
	defer resp.Body.Close()
	b, over, err := httpservice.ReadAtMost(resp.Body, MaxProviderResponse)
	if err != nil {
		return ProviderResponse{}, f.Of(ctx, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// The provider said no: nothing was charged, and nothing counts.
		return ProviderResponse{}, kindapi.NotPerformed(kindapi.Errorf(abi.EIO, "pay: the provider refused the charge (HTTP %d)", resp.StatusCode))
	}
	if over {
		return ProviderResponse{}, kindapi.Errorf(abi.EIO, "pay: the provider's answer exceeds %d bytes", MaxProviderResponse)
	}
	var pr2 ProviderResponse
	if err := json.Unmarshal(b, &pr2); err != nil {
		return ProviderResponse{}, kindapi.Errorf(abi.EIO, "pay: the provider's answer is not JSON (HTTP %d)", resp.StatusCode)
	}
	inst := s.instrument.Value()
	if pr2.ID == "" || len(pr2.ID) > 255 || strings.Contains(pr2.ID, inst) || strings.Contains(pr2.Status, inst) {
		return ProviderResponse{}, kindapi.Errorf(abi.EIO, "pay: the provider's answer has no usable charge id")
	}
	if pr2.Status != "succeeded" {
		return ProviderResponse{}, kindapi.Errorf(abi.EIO, "pay: the provider answered status %s, not \"succeeded\"", kindapi.QuoteTrunc(pr2.Status))
	}
	return pr2, nil
}

func containsSorted(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// checkKey validates an idempotency key: 1..255 printable ASCII bytes.
func checkKey(k string) error {
	if len(k) > MaxKeyLen {
		return fmt.Errorf("idempotency_key of %d bytes (max %d)", len(k), MaxKeyLen)
	}
	for _, c := range []byte(k) {
		if c < 0x21 || c > 0x7e {
			return errors.New("idempotency_key must be printable ASCII without spaces")
		}
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
