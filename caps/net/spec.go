package net

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Defaults for a grant spec's optional fields.
const (
	DefaultMaxRequestBytes  = 1 << 20  // 1 MiB
	DefaultMaxResponseBytes = 10 << 20 // 10 MiB
	DefaultTimeout          = 30 * time.Second
	DefaultMaxRedirects     = 5
)

// Bounds on a grant spec. A spec past one is a grant error, not clamped.
const (
	// MaxRequestBytesLimit bounds max_request_bytes: a body is at most a
	// blob.
	MaxRequestBytesLimit = abi.MaxBlobLen
	// MaxResponseBytesLimit bounds max_response_bytes so that the encoded
	// response (body, headers and framing) fits in a blob.
	MaxResponseBytesLimit = abi.MaxBlobLen - abi.MaxHeaderBytes - 4096
	// MaxTimeout bounds timeout.
	MaxTimeout = time.Hour
	// MaxRedirectsLimit bounds max_redirects.
	MaxRedirectsLimit = 20
	// MaxMethods, MaxPaths and MaxInjectedHeaders bound the lists.
	MaxMethods         = 16
	MaxPaths           = 64
	MaxInjectedHeaders = 16
)

// grantSpec is a cap "net" block as JSON. Pointer and nil-slice fields are
// optional; absent takes the default.
type grantSpec struct {
	Origin           *string      `json:"origin"`
	Methods          []string     `json:"methods"`
	Paths            []string     `json:"paths"`
	MaxRequestBytes  *abi.Size    `json:"max_request_bytes"`
	MaxResponseBytes *abi.Size    `json:"max_response_bytes"`
	Timeout          *string      `json:"timeout"`
	MaxRedirects     *int         `json:"max_redirects"`
	AllowPrivate     *bool        `json:"allow_private"`
	Clearance        []string     `json:"clearance"`
	AcceptsUntrusted *bool        `json:"accepts_untrusted"`
	RefusesTaints    []string     `json:"refuses_taints"`
	Labels           []string     `json:"labels"`
	Headers          []headerSpec `json:"headers"`
	// Responses maps a path prefix to its responses' labels (responses.go).
	Responses map[string]json.RawMessage `json:"responses"`
}

// headerSpec names a header the kernel injects and where its value comes
// from: exactly one of Env (a host environment variable) and File (a file,
// relative to the manifest; one trailing newline is removed). Prefix is
// prepended, e.g. "Bearer ".
type headerSpec struct {
	Name   string `json:"name"`
	Env    string `json:"env"`
	File   string `json:"file"`
	Prefix string `json:"prefix"`
}

// narrowReq is a cap_derive request. Every field is optional; absent means
// "as the parent".
type narrowReq struct {
	Origin           *string   `json:"origin"`
	Methods          []string  `json:"methods"`
	Paths            []string  `json:"paths"`
	MaxRequestBytes  *abi.Size `json:"max_request_bytes"`
	MaxResponseBytes *abi.Size `json:"max_response_bytes"`
	Timeout          *string   `json:"timeout"`
	MaxRedirects     *int      `json:"max_redirects"`
	AllowPrivate     *bool     `json:"allow_private"`
	Clearance        []string  `json:"clearance"`
	AcceptsUntrusted *bool     `json:"accepts_untrusted"`
	RefusesTaints    []string  `json:"refuses_taints"`
	Labels           []string  `json:"labels"`
	DropHeaders      []string  `json:"drop_headers"`
	// Responses may only repeat the parent's: they are inherited.
	Responses map[string]json.RawMessage `json:"responses"`
}

// canonMethod validates a method (an RFC 7230 token) and returns it in
// upper case. CONNECT and TRACE are never allowed: CONNECT is not a fetch,
// and TRACE echoes the request, injected credentials included, back to
// the guest.
func canonMethod(m string) (string, error) {
	if m == "" || len(m) > abi.MaxMethodLen {
		return "", fmt.Errorf("method %s: length must be 1..%d", quoteTrunc(m), abi.MaxMethodLen)
	}
	if _, ok := canonHeaderName(m); !ok {
		return "", fmt.Errorf("method %s is not a token", quoteTrunc(m))
	}
	m = strings.ToUpper(m)
	switch m {
	case "CONNECT", "TRACE", "TRACK":
		return "", fmt.Errorf("method %s is never allowed", m)
	}
	return m, nil
}

// canonMethods validates and sorts a method list.
func canonMethods(ms []string) ([]string, error) {
	return canonList(ms, MaxMethods, "methods", canonMethod)
}

// canonPrefixes validates and sorts a path-prefix list.
func canonPrefixes(ps []string) ([]string, error) {
	return canonList(ps, MaxPaths, "paths", func(p string) (string, error) {
		c, err := canonPrefix(p)
		if err != nil {
			return "", fmt.Errorf("path %s: %v", quoteTrunc(p), err)
		}
		return c, nil
	})
}

// canonList canonicalises each item of a non-empty, bounded list, then
// sorts and deduplicates it.
func canonList(items []string, max int, noun string, canon func(string) (string, error)) ([]string, error) {
	if len(items) == 0 {
		return nil, errors.New("must not be empty (omit it for the default)")
	}
	if len(items) > max {
		return nil, fmt.Errorf("%d %s (max %d)", len(items), noun, max)
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		c, err := canon(it)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// parseTimeout parses a Go duration ("10s", "1m30s") that must be positive.
func parseTimeout(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad duration %s (want e.g. \"10s\")", quoteTrunc(s))
	}
	if d <= 0 {
		return 0, errors.New("must be positive")
	}
	return d, nil
}

// grant mints a root scope from a spec.
func grant(g kindapi.GrantContext, spec []byte, defTimeout time.Duration) (*Scope, error) {
	var sp grantSpec
	if err := kindapi.DecodeSpec("net", spec, &sp); err != nil {
		return nil, err
	}
	fe := func(field, format string, args ...any) error {
		return &kindapi.FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	s := &Scope{
		methods:      []string{"GET"},
		paths:        []string{"/"},
		maxRequest:   DefaultMaxRequestBytes,
		maxResponse:  DefaultMaxResponseBytes,
		timeout:      defTimeout,
		maxRedirects: DefaultMaxRedirects,
	}
	if sp.Origin == nil {
		return nil, fe("origin", "required")
	}
	o, err := parseOrigin(*sp.Origin)
	if err != nil {
		return nil, fe("origin", "%v", err)
	}
	s.origin = o
	if sp.AllowPrivate != nil {
		s.allowPrivate = *sp.AllowPrivate
	}
	if sp.Clearance != nil {
		s.clearance = kindapi.NewLabel(sp.Clearance, nil)
	}
	if sp.AcceptsUntrusted != nil {
		s.refuseTaint = !*sp.AcceptsUntrusted
	}
	if sp.RefusesTaints != nil {
		if s.refused, err = kindapi.ParseTaintPatterns(sp.RefusesTaints); err != nil {
			return nil, fe("refuses_taints", "%v", err)
		}
	}
	if sp.Labels != nil {
		s.respLabels = kindapi.NewLabel(sp.Labels, nil).Conf()
	}
	if sp.Responses != nil {
		if s.responses, err = parseResponses(sp.Responses, o); err != nil {
			return nil, err
		}
	}
	if !s.allowPrivate {
		if why := privateHost(o); why != "" {
			return nil, fe("origin", "%s; set allow_private = true to allow it", why)
		}
	}
	if sp.Methods != nil {
		if s.methods, err = canonMethods(sp.Methods); err != nil {
			return nil, fe("methods", "%v", err)
		}
	}
	if sp.Paths != nil {
		if s.paths, err = canonPrefixes(sp.Paths); err != nil {
			return nil, fe("paths", "%v", err)
		}
	}
	if v := sp.MaxRequestBytes; v != nil {
		if *v < 0 || *v > MaxRequestBytesLimit {
			return nil, fe("max_request_bytes", "must be 0..%d", MaxRequestBytesLimit)
		}
		s.maxRequest = int64(*v)
	}
	if v := sp.MaxResponseBytes; v != nil {
		if *v < 0 || *v > MaxResponseBytesLimit {
			return nil, fe("max_response_bytes", "must be 0..%d", MaxResponseBytesLimit)
		}
		s.maxResponse = int64(*v)
	}
	if v := sp.Timeout; v != nil {
		d, err := parseTimeout(*v)
		if err != nil {
			return nil, fe("timeout", "%v", err)
		}
		if d > MaxTimeout {
			return nil, fe("timeout", "must be at most %s", MaxTimeout)
		}
		s.timeout = d
	}
	if v := sp.MaxRedirects; v != nil {
		if *v < 0 || *v > MaxRedirectsLimit {
			return nil, fe("max_redirects", "must be 0..%d", MaxRedirectsLimit)
		}
		s.maxRedirects = *v
	}
	if len(sp.Headers) > MaxInjectedHeaders {
		return nil, fe("headers", "%d headers (max %d)", len(sp.Headers), MaxInjectedHeaders)
	}
	for i, h := range sp.Headers {
		inj, err := readHeader(g, fmt.Sprintf("headers[%d]", i), h)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(s.headers, func(p injected) bool { return p.name == inj.name }) {
			return nil, fe(fmt.Sprintf("headers[%d].name", i), "header %s is injected twice", inj.name)
		}
		s.headers = append(s.headers, inj)
		s.reserved = append(s.reserved, inj.name)
	}
	slices.SortFunc(s.headers, func(a, b injected) int { return strings.Compare(a.name, b.name) })
	slices.Sort(s.reserved)
	return s, nil
}

// readHeader reads an injected header's secret through the grant context.
// Errors name the field and the variable or file, never the value.
func readHeader(g kindapi.GrantContext, field string, h headerSpec) (injected, error) {
	fe := func(sub, format string, args ...any) error {
		return &kindapi.FieldError{Field: field + sub, Msg: fmt.Sprintf(format, args...)}
	}
	name, ok := canonHeaderName(h.Name)
	if !ok {
		return injected{}, fe(".name", "%s is not a valid header name", quoteTrunc(h.Name))
	}
	if why := grantForbidden(name); why != "" {
		return injected{}, fe(".name", "%s %s", name, why)
	}
	raw, _, err := g.ReadSecret(kindapi.SecretSource{Env: h.Env, File: h.File}, "the value of header "+name)
	if err != nil {
		return injected{}, kindapi.Prefixed(field, err)
	}
	value := h.Prefix + raw
	if !validHeaderValue(value) {
		// Say what is wrong without quoting the value.
		return injected{}, fe(sourceField(h), "the value of header %s has a control character or newline", name)
	}
	inj := injected{name: name, value: kindapi.NewSecret(value)}
	switch {
	case len(raw) >= minProbeLen:
		inj.probe = kindapi.NewSecret(raw)
	case len(value) >= minProbeLen:
		inj.probe = kindapi.NewSecret(value)
	}
	return inj, nil
}

func sourceField(h headerSpec) string {
	if h.Env != "" {
		return ".env"
	}
	return ".file"
}

// narrow returns the scope req asks for within parent, or an error:
// EINVAL for a malformed request, EDENIED naming every field that would
// widen the parent.
func narrow(parent *Scope, req []byte) (*Scope, error) {
	var r narrowReq
	if err := kindapi.DecodeNarrow("net", req, &r); err != nil {
		return nil, err
	}
	inval := func(field, format string, args ...any) error {
		return kindapi.Errorf(abi.EINVAL, "net: narrowing request: %s: %s", field, fmt.Sprintf(format, args...))
	}
	child := *parent // shallow copy; slices are replaced, never mutated
	var widen []string

	if r.Origin != nil {
		o, err := parseOrigin(*r.Origin)
		if err != nil {
			return nil, inval("origin", "%v", err)
		}
		if o != parent.origin {
			widen = append(widen, fmt.Sprintf("origin %s is not the capability's origin %s", o, parent.origin))
		}
	}
	if r.Methods != nil {
		ms, err := canonMethods(r.Methods)
		if err != nil {
			return nil, inval("methods", "%v", err)
		}
		var extra []string
		for _, m := range ms {
			if !slices.Contains(parent.methods, m) {
				extra = append(extra, m)
			}
		}
		if extra != nil {
			widen = append(widen, fmt.Sprintf("methods %v not in %v", extra, parent.methods))
		}
		child.methods = ms
	}
	if r.Paths != nil {
		ps, err := canonPrefixes(r.Paths)
		if err != nil {
			return nil, inval("paths", "%v", err)
		}
		var extra []string
		for _, p := range ps {
			if !pathAllowed(parent.paths, p) {
				extra = append(extra, p)
			}
		}
		if extra != nil {
			widen = append(widen, fmt.Sprintf("paths %v not within %v", extra, parent.paths))
		}
		child.paths = ps
	}
	limit := func(field string, v *abi.Size, parentV int64, dst *int64) error {
		if v == nil {
			return nil
		}
		if *v < 0 {
			return inval(field, "must not be negative")
		}
		if int64(*v) > parentV {
			widen = append(widen, fmt.Sprintf("%s %d exceeds %d", field, *v, parentV))
		}
		*dst = int64(*v)
		return nil
	}
	if err := limit("max_request_bytes", r.MaxRequestBytes, parent.maxRequest, &child.maxRequest); err != nil {
		return nil, err
	}
	if err := limit("max_response_bytes", r.MaxResponseBytes, parent.maxResponse, &child.maxResponse); err != nil {
		return nil, err
	}
	if r.Timeout != nil {
		d, err := parseTimeout(*r.Timeout)
		if err != nil {
			return nil, inval("timeout", "%v", err)
		}
		if d > parent.timeout {
			widen = append(widen, fmt.Sprintf("timeout %s exceeds %s", d, parent.timeout))
		}
		child.timeout = d
	}
	if r.MaxRedirects != nil {
		if *r.MaxRedirects < 0 {
			return nil, inval("max_redirects", "must not be negative")
		}
		if *r.MaxRedirects > parent.maxRedirects {
			widen = append(widen, fmt.Sprintf("max_redirects %d exceeds %d", *r.MaxRedirects, parent.maxRedirects))
		}
		child.maxRedirects = *r.MaxRedirects
	}
	if r.AllowPrivate != nil {
		if *r.AllowPrivate && !parent.allowPrivate {
			widen = append(widen, "allow_private true but the capability forbids private addresses")
		}
		child.allowPrivate = *r.AllowPrivate
	}
	if r.Clearance != nil {
		c := kindapi.NewLabel(r.Clearance, nil)
		if !c.CanFlowTo(parent.clearance) {
			widen = append(widen, fmt.Sprintf("clearance %v exceeds %v", c.Conf(), parent.clearance.Conf()))
		}
		child.clearance = c
	}
	if r.AcceptsUntrusted != nil {
		if *r.AcceptsUntrusted && parent.refuseTaint {
			widen = append(widen, "accepts_untrusted true but the capability refuses untrusted data")
		}
		child.refuseTaint = !*r.AcceptsUntrusted
	}
	if r.RefusesTaints != nil {
		ts, err := kindapi.ParseTaintPatterns(r.RefusesTaints)
		if err != nil {
			return nil, inval("refuses_taints", "%v", err)
		}
		// Refusing more is narrower; no refused taint may be dropped.
		for _, p := range parent.refused.List() {
			if one, _ := kindapi.ParseTaintPatterns([]string{p}); !ts.Covers(one) {
				widen = append(widen, "refuses_taints drops "+p)
			}
		}
		child.refused = ts
	}
	if r.Responses != nil {
		rs, err := parseResponses(r.Responses, parent.origin)
		if err != nil {
			return nil, inval("responses", "%v", err)
		}
		if !equalResponses(rs, parent.responses) {
			widen = append(widen, "responses are inherited and cannot be changed by narrowing (a different taint is not narrower)")
		}
	}
	if r.Labels != nil {
		// More labels on responses is narrower: what the child reads is
		// more restricted. Dropping one would widen.
		ls := kindapi.NewLabel(r.Labels, nil).Conf()
		for _, l := range parent.respLabels {
			if !slices.Contains(ls, l) {
				widen = append(widen, "labels drop "+l)
			}
		}
		child.respLabels = ls
	}
	if r.DropHeaders != nil {
		drop := make([]string, 0, len(r.DropHeaders))
		for _, n := range r.DropHeaders {
			c, ok := canonHeaderName(n)
			if !ok {
				return nil, inval("drop_headers", "%s is not a valid header name", quoteTrunc(n))
			}
			if !parent.reservedHeader(c) {
				return nil, inval("drop_headers", "%s is not a header this capability injects", c)
			}
			drop = append(drop, c)
		}
		child.headers = slices.DeleteFunc(slices.Clone(parent.headers), func(h injected) bool {
			return slices.Contains(drop, h.name)
		})
	}
	if widen != nil {
		return nil, kindapi.Errorf(abi.EDENIED, "net: narrowing would widen the capability: %s", strings.Join(widen, "; "))
	}
	// Cloned so that no two scopes share a backing array.
	child.methods = slices.Clone(child.methods)
	child.paths = slices.Clone(child.paths)
	child.headers = slices.Clone(child.headers)
	child.reserved = slices.Clone(parent.reserved)
	return &child, nil
}
