package net

import (
	"context"
	"crypto/tls"
	"fmt"
	gonet "net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// KindName is the name the kind registers under.
const KindName = "net"

// Kind is the net capability kind. It is safe for concurrent use. Make one
// with New.
type Kind struct {
	defTimeout time.Duration
	// Two clients, so a connection dialed for a scope that allows private
	// addresses is never pooled and reused for one that does not. Neither
	// has a cookie jar or a proxy; both leave redirects to fetch.
	public  *http.Client
	private *http.Client
}

var _ kindapi.Kind = (*Kind)(nil)

// config is what Options set. It is read once, by New.
type config struct {
	lookup     lookupFunc
	resolver   *gonet.Resolver
	defTimeout time.Duration
	tls        *tls.Config
}

// Option configures a Kind.
type Option func(*config)

// WithResolver resolves origin names with r instead of net.DefaultResolver.
func WithResolver(r *gonet.Resolver) Option { return func(c *config) { c.resolver = r } }

// WithLookup resolves origin names with f, overriding WithResolver. Tests
// use it to point a name at a loopback server. Whatever f returns, the
// private-address policy applies to the addresses dialed.
func WithLookup(f func(ctx context.Context, host string) ([]netip.Addr, error)) Option {
	return func(c *config) { c.lookup = f }
}

// WithDefaultTimeout sets the timeout of grants that name none (default
// DefaultTimeout). It must be positive and at most MaxTimeout; other
// values are ignored.
func WithDefaultTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 && d <= MaxTimeout {
			c.defTimeout = d
		}
	}
}

// WithTLSConfig sets the TLS client configuration (a clone is kept), e.g.
// to trust a test server's certificate.
func WithTLSConfig(t *tls.Config) Option {
	return func(c *config) { c.tls = t.Clone() }
}

// New returns the net kind.
func New(opts ...Option) *Kind {
	cfg := config{defTimeout: DefaultTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	lookup := cfg.lookup
	if lookup == nil {
		lookup = defaultLookup(cfg.resolver)
	}
	client := func(allowPrivate bool) *http.Client {
		t := &http.Transport{
			Proxy:                  nil, // never an environment proxy
			DialContext:            dialer(lookup, allowPrivate),
			TLSClientConfig:        cfg.tls.Clone(),
			ForceAttemptHTTP2:      true,
			TLSHandshakeTimeout:    10 * time.Second,
			ResponseHeaderTimeout:  0, // the scope's timeout bounds everything
			ExpectContinueTimeout:  time.Second,
			MaxIdleConns:           64,
			MaxIdleConnsPerHost:    4,
			IdleConnTimeout:        90 * time.Second,
			MaxResponseHeaderBytes: 2 * abi.MaxHeaderBytes,
		}
		return &http.Client{
			Transport: t,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse // fetch follows redirects itself
			},
		}
	}
	return &Kind{defTimeout: cfg.defTimeout, public: client(false), private: client(true)}
}

// Name returns "net".
func (k *Kind) Name() string { return KindName }

// Info implements kindapi.Kind: one operation, fetch; constraints see one
// variable, request (see vars).
func (k *Kind) Info() kindapi.Info {
	return kindapi.Info{Ops: []string{abi.NetFetchOp}, Vars: []string{"request"}}
}

// Grant mints a root scope from a cap "net" block. See the package
// documentation for the fields; errors are *kindapi.FieldError when they
// concern one field.
func (k *Kind) Grant(g kindapi.GrantContext, spec []byte) (kindapi.Scope, error) {
	return kindapi.AsScope(grant(g, spec, k.defTimeout))
}

// Narrow returns the scope req asks for within parent. A malformed request
// is EINVAL; one that would widen parent in any way is EDENIED (matching
// kindapi.ErrDenied), naming what widened. Nothing is clamped.
func (k *Kind) Narrow(parent kindapi.Scope, req []byte) (kindapi.Scope, error) {
	p, err := kindapi.ScopeAs[*Scope](parent, "net")
	if err != nil {
		return nil, err
	}
	return kindapi.AsScope(narrow(p, req))
}

// CloseIdleConnections closes pooled connections, e.g. when a run ends.
func (k *Kind) CloseIdleConnections() {
	k.public.CloseIdleConnections()
	k.private.CloseIdleConnections()
}

func (k *Kind) client(s *Scope) *http.Client {
	if s.allowPrivate {
		return k.private
	}
	return k.public
}

// Describe implements kindapi.Kind: the scope's limits in readable units.
// Bounds left at their defaults are not restated (the kind's timeout,
// k.defTimeout, counts as one).
func (k *Kind) Describe(sc kindapi.Scope) kindapi.Description {
	s, err := kindapi.ScopeAs[*Scope](sc, "net")
	if err != nil {
		return kindapi.Description{}
	}
	d := kindapi.Description{
		Fields: []kindapi.Detail{
			{Name: "origin", Value: s.Origin()},
			{Name: "methods", Value: strings.Join(s.methods, ",")},
			{Name: "paths", Value: strings.Join(s.paths, ",")},
		},
		Sink:  s.sink(),
		Label: s.labelBound(),
	}
	d.Repeatable = true
	for _, m := range s.methods {
		if m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions {
			d.Repeatable, d.NotRepeatable = false, "it allows "+m+", which a server may perform twice"
			break
		}
	}
	add := func(name, value string) { d.Fields = append(d.Fields, kindapi.Detail{Name: name, Value: value}) }
	if c := s.clearance.Conf(); len(c) > 0 {
		add("clearance", strings.Join(c, ","))
	}
	if s.refuseTaint {
		add("accepts_untrusted", "false")
	}
	if !s.refused.IsZero() {
		add("refuses_taints", strings.Join(s.refused.List(), ","))
	}
	if len(s.respLabels) > 0 {
		add("labels", strings.Join(s.respLabels, ","))
	}
	d.Fields = append(d.Fields, describeResponses(s.responses)...)
	if len(s.headers) > 0 {
		add("headers", strings.Join(s.HeaderNames(), ",")+" (set by the kernel)")
	}
	if s.maxRequest != DefaultMaxRequestBytes {
		add("max_request_bytes", kindapi.FormatBytes(s.maxRequest))
	}
	if s.maxResponse != DefaultMaxResponseBytes {
		add("max_response_bytes", kindapi.FormatBytes(s.maxResponse))
	}
	if s.timeout != k.defTimeout {
		add("timeout", s.timeout.String())
	}
	if s.maxRedirects != DefaultMaxRedirects {
		add("max_redirects", fmt.Sprint(s.maxRedirects))
	}
	if s.allowPrivate {
		add("allow_private", "true")
	}
	for _, p := range s.paths {
		d.Reaches = append(d.Reaches, s.Origin()+p)
	}
	return d
}
