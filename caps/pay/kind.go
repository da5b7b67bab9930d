package pay

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	gonet "net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel"
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
	public     *http.Client // dials public addresses only
	private    *http.Client // for grants with allow_private
}

var _ kernel.Kind = (*Kind)(nil)

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
	client := func(allowPrivate bool) *http.Client {
		d := &gonet.Dialer{Timeout: 10 * time.Second}
		if !allowPrivate {
			d.Control = func(_, address string, _ syscall.RawConn) error {
				ap, err := netip.ParseAddrPort(address)
				if err != nil {
					return fmt.Errorf("pay: dial %s: %v", address, err)
				}
				if why := privateAddr(ap.Addr()); why != "" {
					return fmt.Errorf("pay: provider address %s is %s and allow_private is false", ap.Addr(), why)
				}
				return nil
			}
		}
		return &http.Client{
			Transport: &http.Transport{
				Proxy:                  nil, // never an environment proxy
				DialContext:            d.DialContext,
				ForceAttemptHTTP2:      true,
				TLSHandshakeTimeout:    10 * time.Second,
				MaxIdleConns:           16,
				IdleConnTimeout:        90 * time.Second,
				MaxResponseHeaderBytes: 64 << 10,
			},
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return errors.New("pay: the provider redirected; charges are never re-sent elsewhere")
			},
		}
	}
	k.public, k.private = client(false), client(true)
	return k
}

// Name returns "pay".
func (k *Kind) Name() string { return KindName }

// Ops returns ["charge"].
func (k *Kind) Ops() []string { return []string{ChargeOp} }

// Grant mints a root scope from a cap "pay" block (see the package
// documentation). Errors are *kernel.FieldError when they concern one
// field.
func (k *Kind) Grant(g kernel.GrantContext, spec []byte) (kernel.Scope, error) {
	return kernel.AsScope(k.grant(g, spec))
}

// Narrow returns the scope req asks for within parent. A malformed request
// is EINVAL; one that would widen parent is EDENIED naming what widened.
func (k *Kind) Narrow(parent kernel.Scope, req []byte) (kernel.Scope, error) {
	p, err := kernel.ScopeAs[*Scope](parent, "pay")
	if err != nil {
		return nil, err
	}
	return kernel.AsScope(k.narrow(p, req))
}

// CloseIdleConnections closes pooled provider connections.
func (k *Kind) CloseIdleConnections() {
	k.public.CloseIdleConnections()
	k.private.CloseIdleConnections()
}

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

// Invoke performs "charge". See the package documentation for the order of
// the checks and the errno of each.
func (k *Kind) Invoke(ctx context.Context, call *kernel.Call) (*kernel.Result, error) {
	if call.Op != ChargeOp {
		return nil, kernel.Errorf(abi.ENOTSUP, "pay: no operation %q", call.Op)
	}
	s, err := kernel.ScopeAs[*Scope](call.Scope, "pay")
	if err != nil {
		return nil, err
	}
	if s.ledger == nil {
		return nil, kernel.Errorf(abi.EINTERNAL, "pay: scope has no ledger")
	}
	// 1. Decode.
	var a chargeArgs
	if err := abi.DecodeJSON(call.Args, &a); err != nil {
		if errors.Is(err, abi.ErrTooLarge) {
			return nil, kernel.Errorf(abi.ELIMIT, "pay: charge: %v", err)
		}
		return nil, kernel.Errorf(abi.EINVAL, "pay: charge: %v", err)
	}
	inval := func(format string, args ...any) error {
		return kernel.Errorf(abi.EINVAL, "pay: charge: "+format, args...)
	}
	if a.Payee == nil || a.Amount == nil || a.Currency == nil {
		return nil, inval("payee, amount and currency are required")
	}
	payee, err := canonPayee(*a.Payee)
	if err != nil {
		return nil, inval("%v", err)
	}
	currency, err := canonCurrency(*a.Currency)
	if err != nil {
		return nil, inval("%v", err)
	}
	amount, err := parseDecimal(string(*a.Amount))
	if err != nil {
		return nil, inval("%v", err)
	}
	if amount == 0 {
		return nil, inval("amount must be positive")
	}
	if len(a.Description) > MaxDescriptionLen {
		return nil, kernel.Errorf(abi.ELIMIT, "pay: charge: description of %d bytes (max %d)", len(a.Description), MaxDescriptionLen)
	}
	if len(a.Offer) > MaxOfferBytes {
		return nil, kernel.Errorf(abi.ELIMIT, "pay: charge: offer of %d bytes (max %d)", len(a.Offer), MaxOfferBytes)
	}
	var offer map[string]any
	if len(a.Offer) > 0 && string(a.Offer) != "null" {
		if err := json.Unmarshal(a.Offer, &offer); err != nil || offer == nil {
			return nil, inval("offer must be a JSON object")
		}
	}
	key := a.IdempotencyKey
	if key == "" {
		key = "auto-" + randomHex(12)
	} else if err := checkKey(key); err != nil {
		return nil, inval("%v", err)
	}
	summary := fmt.Sprintf("charge %s %s to %s", formatMinor(amount), currency, payee)

	// 2. Expiry.
	if !s.expires.IsZero() && !k.now().Before(s.expires) {
		return nil, kernel.Errorf(abi.EEXPIRED, "pay: the capability expired at %s", s.expires.UTC().Format(time.RFC3339))
	}
	// 3-5. Scope.
	if !containsSorted(s.payees, payee) {
		return nil, kernel.Errorf(abi.EDENIED, "pay: payee %s is not allowed (allowed: %v)", payee, s.payees)
	}
	if currency != s.currency {
		return nil, kernel.Errorf(abi.EDENIED, "pay: currency %s is not the capability's %s", currency, s.currency)
	}
	if amount > s.maxAmount {
		return nil, kernel.Errorf(abi.EDENIED, "pay: %s exceeds the maximum charge of %s %s", summary, formatMinor(s.maxAmount), s.currency)
	}
	// 6. Idempotency: one charge per key in the whole tree.
	receipt, entry, err := s.ledger.tree.claim(ctx, key, payee, currency, amount)
	if err != nil {
		return nil, err
	}
	if receipt != nil {
		call.Logger.Info("pay: idempotent replay", "idempotency_key", key, "payee", payee, "amount", formatMinor(amount), "currency", currency)
		return &kernel.Result{Data: bytes.Clone(receipt)}, nil
	}
	var out []byte
	defer func() { s.ledger.tree.finish(key, entry, out) }()

	// 7. Budget and uses, reserved on every ancestor at once.
	if err := s.ledger.reserve(amount); err != nil {
		return nil, err
	}
	reserved := true
	defer func() {
		if reserved {
			s.ledger.release(amount)
		}
	}()

	// 8. Approval.
	if s.approveAbove >= 0 && amount > s.approveAbove {
		details := map[string]any{
			"payee": payee, "amount": formatMinor(amount), "currency": currency,
			"description": a.Description, "idempotency_key": key,
		}
		if offer != nil {
			details["offer"] = offer
		}
		if err := call.Approve(ctx, summary, details); err != nil {
			if kernel.ErrnoOf(err) == abi.EINTERNAL {
				return nil, &kernel.Error{Errno: abi.EAPPROVAL, Msg: "pay: approval failed: " + summary, Err: err}
			}
			return nil, err
		}
	}

	// 9. The provider.
	pr := ProviderRequest{
		AmountMinor: amount, Currency: currency, Payee: payee, Instrument: s.instrument.Value(),
		IdempotencyKey: "mandate-" + s.ledger.tree.id + "-" + key, Description: a.Description,
	}
	if offer != nil {
		pr.Details = a.Offer
	}
	resp, err := k.post(ctx, s, pr)
	if err != nil {
		return nil, err
	}
	rec, err := json.Marshal(Receipt{
		ChargeID: resp.ID, Amount: formatMinor(amount), Currency: currency, Payee: payee,
		IdempotencyKey: key, Status: resp.Status,
	})
	if err != nil {
		return nil, err
	}
	reserved, out = false, rec
	call.Logger.Info("pay: charged", "charge_id", resp.ID, "payee", payee, "amount", formatMinor(amount),
		"currency", currency, "idempotency_key", key)
	return &kernel.Result{Data: bytes.Clone(rec)}, nil
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
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.provider+"/charges", bytes.NewReader(body))
	if err != nil {
		return ProviderResponse{}, kernel.Errorf(abi.EIO, "pay: provider request: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Idempotency-Key", pr.IdempotencyKey)
	client := k.public
	if s.allowPrivate {
		client = k.private
	}
	fail := func(err error) (ProviderResponse, error) {
		if ctx.Err() != nil || isTimeout(err) {
			return ProviderResponse{}, kernel.Errorf(abi.ETIMEDOUT, "pay: the provider did not answer within %s", s.timeout)
		}
		return ProviderResponse{}, kernel.Errorf(abi.EIO, "pay: provider: %s", redact(err.Error(), s.instrument))
	}
	resp, err := client.Do(req)
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxProviderResponse+1))
	if err != nil {
		return fail(err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return ProviderResponse{}, kernel.Errorf(abi.EIO, "pay: the provider refused the charge (HTTP %d)", resp.StatusCode)
	}
	if len(b) > MaxProviderResponse {
		return ProviderResponse{}, kernel.Errorf(abi.EIO, "pay: the provider's answer exceeds %d bytes", MaxProviderResponse)
	}
	var pr2 ProviderResponse
	if err := json.Unmarshal(b, &pr2); err != nil {
		return ProviderResponse{}, kernel.Errorf(abi.EIO, "pay: the provider's answer is not JSON (HTTP %d)", resp.StatusCode)
	}
	inst := s.instrument.Value()
	if pr2.ID == "" || len(pr2.ID) > 255 || strings.Contains(pr2.ID, inst) || strings.Contains(pr2.Status, inst) {
		return ProviderResponse{}, kernel.Errorf(abi.EIO, "pay: the provider's answer has no usable charge id")
	}
	if pr2.Status != "succeeded" {
		return ProviderResponse{}, kernel.Errorf(abi.EIO, "pay: the provider answered status %s, not \"succeeded\"", quoteTrunc(pr2.Status))
	}
	return pr2, nil
}

func isTimeout(err error) bool {
	var ne gonet.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func redact(s string, sec kernel.Secret) string {
	if v := sec.Value(); v != "" {
		s = strings.ReplaceAll(s, v, "[redacted]")
	}
	return s
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

// privateHost reports why a provider host may not be used without
// allow_private: a non-public IP literal or a name under "localhost".
func privateHost(host string) string {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return "the provider " + h + " is a loopback name"
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if why := privateAddr(a); why != "" {
			return "the provider " + h + " is " + why
		}
	}
	return ""
}

var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// privateAddr reports why a is not a public unicast address, or "".
func privateAddr(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case a.IsLoopback():
		return "a loopback address"
	case a.IsPrivate():
		return "a private address"
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return "a link-local address"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsMulticast():
		return "a multicast address"
	case cgnat.Contains(a):
		return "a shared (CGNAT) address"
	case !a.IsGlobalUnicast():
		return "not a global unicast address"
	}
	return ""
}
