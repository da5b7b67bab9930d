package llm

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/egress"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Defaults and bounds of a grant spec. A spec past a bound is a grant
// error, never clamped.
const (
	DefaultMaxTokens        = 1024
	MaxMaxTokens            = 1 << 20
	DefaultTimeout          = 2 * time.Minute
	MaxTimeout              = 30 * time.Minute
	DefaultMaxRequestBytes  = 4 << 20
	DefaultMaxResponseBytes = 4 << 20
	MaxRequestBytesLimit    = abi.MaxBlobLen
	MaxResponseBytesLimit   = abi.MaxBlobLen / 2
	MaxModels               = 64
	MaxModelLen             = 256
	MaxKeyLen               = 4096
)

// ChatPath is where chat requests go, under the endpoint.
const ChatPath = "/v1/chat/completions"

// source names where a secret comes from: exactly one of Env and File.
type source struct {
	Env  string `json:"env"`
	File string `json:"file"`
}

// grantSpec is a cap "llm" block as JSON.
type grantSpec struct {
	Endpoint         *string   `json:"endpoint"`
	Models           []string  `json:"models"`
	APIKey           *source   `json:"api_key"`
	MaxTokens        *int64    `json:"max_tokens"`
	Timeout          *string   `json:"timeout"`
	AllowPrivate     *bool     `json:"allow_private"`
	Clearance        []string  `json:"clearance"`
	AcceptsUntrusted *bool     `json:"accepts_untrusted"`
	RefusesTaints    []string  `json:"refuses_taints"`
	EndorseSchema    *bool     `json:"endorse_schema"`
	MaxRequestBytes  *abi.Size `json:"max_request_bytes"`
	MaxResponseBytes *abi.Size `json:"max_response_bytes"`
}

// narrowReq is a cap_derive request; absent fields keep the parent's.
type narrowReq struct {
	Models           []string  `json:"models"`
	MaxTokens        *int64    `json:"max_tokens"`
	Timeout          *string   `json:"timeout"`
	Clearance        []string  `json:"clearance"`
	AcceptsUntrusted *bool     `json:"accepts_untrusted"`
	RefusesTaints    []string  `json:"refuses_taints"`
	EndorseSchema    *bool     `json:"endorse_schema"`
	MaxRequestBytes  *abi.Size `json:"max_request_bytes"`
	MaxResponseBytes *abi.Size `json:"max_response_bytes"`
}

// parseEndpoint validates the provider's base URL (egress.ParseBaseURL);
// a trailing /v1, which ChatPath adds, is dropped.
func parseEndpoint(s string) (*url.URL, error) {
	u, err := egress.ParseBaseURL(s, "api_key")
	if err != nil {
		return nil, err
	}
	u.Path = strings.TrimSuffix(u.Path, "/v1")
	return u, nil
}

// canonModels validates, sorts and deduplicates a model list.
func canonModels(ms []string) ([]string, error) {
	if len(ms) == 0 {
		return nil, errors.New("must list at least one model")
	}
	if len(ms) > MaxModels {
		return nil, fmt.Errorf("%d models (max %d)", len(ms), MaxModels)
	}
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		if err := checkModel(m); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func checkModel(m string) error {
	if m == "" || len(m) > MaxModelLen {
		return fmt.Errorf("model %s: length must be 1..%d", kindapi.QuoteTrunc(m), MaxModelLen)
	}
	for _, c := range []byte(m) {
		if c <= 0x20 || c >= 0x7f {
			return fmt.Errorf("model %s: printable ASCII without spaces only", kindapi.QuoteTrunc(m))
		}
	}
	return nil
}

// grant mints a root scope.
func (k *Kind) grant(g kindapi.GrantContext, spec []byte) (*Scope, error) {
	var sp grantSpec
	if err := kindapi.DecodeSpec(KindName, spec, &sp); err != nil {
		return nil, err
	}
	fe := func(field, format string, args ...any) error {
		return &kindapi.FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	s := &Scope{maxTokens: DefaultMaxTokens, timeout: k.defTimeout,
		maxRequest: DefaultMaxRequestBytes, maxResponse: DefaultMaxResponseBytes}
	if sp.Endpoint == nil {
		return nil, fe("endpoint", `required: the provider's base URL, e.g. "http://127.0.0.1:8080" (requests go to ENDPOINT%s)`, ChatPath)
	}
	u, err := parseEndpoint(*sp.Endpoint)
	if err != nil {
		return nil, fe("endpoint", "%v", err)
	}
	s.endpoint = u.String()
	if sp.AllowPrivate != nil {
		s.allowPrivate = *sp.AllowPrivate
	}
	if !s.allowPrivate {
		if why := egress.HostReason(u.Hostname()); why != "" {
			return nil, fe("endpoint", "the endpoint %s is %s; set allow_private = true to allow it (a local model)", u.Hostname(), why)
		}
	}
	if sp.Models == nil {
		return nil, fe("models", "required: the model names calls may ask for")
	}
	if s.models, err = canonModels(sp.Models); err != nil {
		return nil, fe("models", "%v", err)
	}
	if sp.APIKey != nil {
		raw, where, err := g.ReadSecret(kindapi.SecretSource{Env: sp.APIKey.Env, File: sp.APIKey.File}, "the API key")
		if err != nil {
			return nil, kindapi.Prefixed("api_key", err)
		}
		if len(raw) > MaxKeyLen {
			return nil, fe("api_key", "the key is longer than %d bytes", MaxKeyLen)
		}
		for _, c := range []byte(raw) {
			if c <= 0x20 || c == 0x7f {
				return nil, fe("api_key", "the key has a space or a control character")
			}
		}
		s.key, s.keySource = kindapi.NewSecret(raw), where
	}
	if sp.MaxTokens != nil {
		if *sp.MaxTokens < 1 || *sp.MaxTokens > MaxMaxTokens {
			return nil, fe("max_tokens", "%d must be in [1, %d]", *sp.MaxTokens, MaxMaxTokens)
		}
		s.maxTokens = *sp.MaxTokens
	}
	if sp.Timeout != nil {
		if s.timeout, err = kindapi.ParseTimeout(*sp.Timeout, MaxTimeout); err != nil {
			return nil, fe("timeout", "%v", err)
		}
	}
	s.clearance = kindapi.NewLabel(sp.Clearance, nil)
	if s.refusal, err = kindapi.ParseRefusal(sp.AcceptsUntrusted, sp.RefusesTaints); err != nil {
		return nil, fe("refuses_taints", "%v", err)
	}
	if sp.EndorseSchema != nil {
		s.endorse = *sp.EndorseSchema
	}
	if sp.MaxRequestBytes != nil {
		if v := int64(*sp.MaxRequestBytes); v < 1 || v > MaxRequestBytesLimit {
			return nil, fe("max_request_bytes", "must be in [1, %d]", MaxRequestBytesLimit)
		}
		s.maxRequest = int64(*sp.MaxRequestBytes)
	}
	if sp.MaxResponseBytes != nil {
		if v := int64(*sp.MaxResponseBytes); v < 1 || v > MaxResponseBytesLimit {
			return nil, fe("max_response_bytes", "must be in [1, %d]", MaxResponseBytesLimit)
		}
		s.maxResponse = int64(*sp.MaxResponseBytes)
	}
	return s, nil
}

// narrow returns the scope req asks for within parent: EINVAL for a
// malformed request, EDENIED naming every field that would widen parent.
func (k *Kind) narrow(parent *Scope, req []byte) (*Scope, error) {
	var r narrowReq
	if err := kindapi.DecodeNarrow("llm", req, &r); err != nil {
		return nil, err
	}
	inval := func(field, format string, args ...any) error {
		return kindapi.Errorf(abi.EINVAL, "llm: narrowing request: %s: %s", field, fmt.Sprintf(format, args...))
	}
	child := *parent
	var widen []string
	if r.Models != nil {
		ms, err := canonModels(r.Models)
		if err != nil {
			return nil, inval("models", "%v", err)
		}
		for _, m := range ms {
			if !slices.Contains(parent.models, m) {
				widen = append(widen, fmt.Sprintf("model %s is not allowed by the parent", kindapi.QuoteTrunc(m)))
			}
		}
		child.models = ms
	}
	if r.MaxTokens != nil {
		if *r.MaxTokens < 1 {
			return nil, inval("max_tokens", "%d must be positive", *r.MaxTokens)
		}
		if *r.MaxTokens > parent.maxTokens {
			widen = append(widen, fmt.Sprintf("max_tokens %d is above the parent's %d", *r.MaxTokens, parent.maxTokens))
		}
		child.maxTokens = *r.MaxTokens
	}
	if r.Timeout != nil {
		d, err := kindapi.ParseTimeout(*r.Timeout, MaxTimeout)
		if err != nil {
			return nil, inval("timeout", "%v", err)
		}
		if d > parent.timeout {
			widen = append(widen, fmt.Sprintf("timeout %s is above the parent's %s", d, parent.timeout))
		}
		child.timeout = d
	}
	if r.Clearance != nil {
		c := kindapi.NewLabel(r.Clearance, nil)
		if !c.CanFlowTo(parent.clearance) {
			widen = append(widen, fmt.Sprintf("clearance %v is above the parent's %v", c.Conf(), parent.clearance.Conf()))
		}
		child.clearance = c
	}
	refusal, drops, err := parent.refusal.Narrow(r.AcceptsUntrusted, r.RefusesTaints)
	if err != nil {
		return nil, inval("refuses_taints", "%v", err)
	}
	child.refusal, widen = refusal, append(widen, drops...)
	if r.EndorseSchema != nil {
		if *r.EndorseSchema && !parent.endorse {
			widen = append(widen, "endorse_schema: the parent may not endorse")
		}
		child.endorse = *r.EndorseSchema
	}
	if r.MaxRequestBytes != nil {
		if v := int64(*r.MaxRequestBytes); v < 1 {
			return nil, inval("max_request_bytes", "must be positive")
		} else if v > parent.maxRequest {
			widen = append(widen, fmt.Sprintf("max_request_bytes %d is above the parent's %d", v, parent.maxRequest))
		}
		child.maxRequest = int64(*r.MaxRequestBytes)
	}
	if r.MaxResponseBytes != nil {
		if v := int64(*r.MaxResponseBytes); v < 1 {
			return nil, inval("max_response_bytes", "must be positive")
		} else if v > parent.maxResponse {
			widen = append(widen, fmt.Sprintf("max_response_bytes %d is above the parent's %d", v, parent.maxResponse))
		}
		child.maxResponse = int64(*r.MaxResponseBytes)
	}
	if len(widen) > 0 {
		return nil, kindapi.Errorf(abi.EDENIED, "llm: narrowing would widen the capability: %s", strings.Join(widen, "; "))
	}
	return &child, nil
}
