package llm

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mandatevm/mandate/caps/internal/httpservice"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// KindName is the name the kind registers under.
const KindName = "llm"

// Kind is the llm capability kind. It is safe for concurrent use. Make
// one with New. It must be registered with the privilege to lower labels
// (kernel.Config.Declassifiers): it computes its answers' labels itself,
// so that extract can drop integrity taints, and every call on its
// capabilities is audited.
type Kind struct {
	defTimeout time.Duration
	clients    *httpservice.Clients
}

var _ kindapi.Kind = (*Kind)(nil)

// Option configures a Kind.
type Option func(*Kind)

// WithDefaultTimeout sets the timeout of grants that name none (default
// DefaultTimeout); values outside (0, MaxTimeout] are ignored.
func WithDefaultTimeout(d time.Duration) Option {
	return func(k *Kind) {
		if d > 0 && d <= MaxTimeout {
			k.defTimeout = d
		}
	}
}

// New returns the llm kind. Its HTTP client is its own: no environment
// proxy, no environment variables read, no cookie jar, no redirects
// followed, every address checked by the one egress guard.
func New(opts ...Option) *Kind {
	k := &Kind{defTimeout: DefaultTimeout}
	for _, o := range opts {
		o(k)
	}
	redirect := errors.New("llm: the endpoint redirected; prompts are never re-sent elsewhere")
	k.clients = httpservice.NewClients("llm: endpoint", redirect)
	return k
}

// Name returns "llm".
func (k *Kind) Name() string { return KindName }

// vars are what when and approve_when see: request (see Prepare).
var vars = []string{"request"}

// Info implements kindapi.Kind: chat and extract; constraints see
// request; amounts are tokens, so a budget reads "100000" or "100k".
func (k *Kind) Info() kindapi.Info {
	return kindapi.Info{Ops: []string{opChat, opExtract}, Vars: vars, Amounts: tokens{}}
}

// tokens reads and shows amounts: a whole number of tokens, optionally
// with a k or M suffix ("100k" is 100000).
type tokens struct{}

func (tokens) ParseAmount(_ kindapi.Scope, text string) (int64, error) {
	t := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(text), "tokens"))
	mult := int64(1)
	switch {
	case strings.HasSuffix(t, "k"):
		mult, t = 1000, strings.TrimSuffix(t, "k")
	case strings.HasSuffix(t, "M"):
		mult, t = 1000000, strings.TrimSuffix(t, "M")
	}
	n, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64)
	if err != nil || n <= 0 || n > (1<<50)/mult {
		return 0, fmt.Errorf("%s is not a positive number of tokens (e.g. 100000 or 100k)", kindapi.QuoteTrunc(text))
	}
	return n * mult, nil
}

func (tokens) FormatAmount(_ kindapi.Scope, n int64) string {
	return strconv.FormatInt(n, 10) + " tokens"
}

// Grant mints a root scope from a cap "llm" block (see the package
// documentation). Errors are *kindapi.FieldError when they concern one
// field.
func (k *Kind) Grant(g kindapi.GrantContext, spec []byte) (kindapi.Scope, error) {
	return kindapi.AsScope(k.grant(g, spec))
}

// Narrow returns the scope req asks for within parent. A malformed request
// is EINVAL; one that would widen parent is EDENIED naming what widened.
func (k *Kind) Narrow(parent kindapi.Scope, req []byte) (kindapi.Scope, error) {
	p, err := kindapi.ScopeAs[*Scope](parent, KindName)
	if err != nil {
		return nil, err
	}
	return kindapi.AsScope(k.narrow(p, req))
}

// Describe implements kindapi.Kind.
func (k *Kind) Describe(sc kindapi.Scope) kindapi.Description {
	s, err := kindapi.ScopeAs[*Scope](sc, KindName)
	if err != nil {
		return kindapi.Description{}
	}
	d := kindapi.Description{
		Fields: []kindapi.Detail{
			{Name: "endpoint", Value: s.endpoint},
			{Name: "models", Value: strings.Join(s.models, ", ")},
			{Name: "max_tokens", Value: strconv.FormatInt(s.maxTokens, 10)},
		},
		Sink:    s.refusal.Sink(s.clearance),
		Label:   kindapi.NewLabel(nil, []string{s.Taint()}),
		Reaches: []string{s.endpoint + ChatPath},
		// A model's call is paid for again, and its answer may differ.
		NotRepeatable: "a model call is paid for again, and its answer may differ",
	}
	add := func(name, value string) { d.Fields = append(d.Fields, kindapi.Detail{Name: name, Value: value}) }
	if s.keySource != "" {
		add("api_key", s.keySource+" (set by the kernel)")
	}
	if c := s.clearance.Conf(); len(c) > 0 {
		add("clearance", strings.Join(c, ", "))
	}
	d.Fields = append(d.Fields, s.refusal.Details()...)
	if s.endorse {
		add("endorse_schema", "true")
	}
	if s.timeout != k.defTimeout {
		add("timeout", s.timeout.String())
	}
	if s.maxRequest != DefaultMaxRequestBytes {
		add("max_request_bytes", kindapi.FormatBytes(s.maxRequest))
	}
	if s.maxResponse != DefaultMaxResponseBytes {
		add("max_response_bytes", kindapi.FormatBytes(s.maxResponse))
	}
	if s.allowPrivate {
		add("allow_private", "true")
	}
	return d
}

// CloseIdleConnections closes pooled connections.
func (k *Kind) CloseIdleConnections() { k.clients.CloseIdleConnections() }
