package net

import (
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"strings"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel"
)

var _ kernel.Activator = (*Kind)(nil)

// Vars implements kernel.Activator: constraints on a net capability see
// one variable, request.
func (k *Kind) Vars() []string { return []string{"request"} }

// Activation implements kernel.Activator. A `when` or `approve_when` on a
// net capability sees the request as the kernel will send it:
//
//	request.method   "POST" (upper case)
//	request.path     the canonical path, "/v1/messages"
//	request.query    {"q": "lisbon"}: each parameter's first value
//	request.headers  {"Content-Type": "application/json"}: the guest's headers, first values
//	request.body     the body parsed as JSON when it is JSON, else the body as a string ("" when empty)
//
// so a capability can be bound to values, e.g.
//
//	request.body.recipient in ["GB29NWBK60161331926819"] && request.body.amount <= 50
func (k *Kind) Activation(call *kernel.Call) (map[string]any, error) {
	s, ok := call.Scope.(*Scope)
	if !ok {
		return nil, errors.New("net: not a net scope")
	}
	r, err := abi.DecodeHTTPRequest(call.Args)
	if err != nil {
		return nil, err
	}
	u, err := s.target(r.URL)
	if err != nil {
		return nil, err
	}
	query := map[string]any{}
	if q, err := url.ParseQuery(u.RawQuery); err == nil {
		for name, vs := range q {
			if len(vs) > 0 {
				query[name] = vs[0]
			}
		}
	}
	headers := map[string]any{}
	for name, vs := range r.Header {
		if c, ok := canonHeaderName(name); ok && len(vs) > 0 {
			headers[c] = vs[0]
		}
	}
	raw := r.Body
	if r.BodyBlob != 0 {
		b, err := call.Blob(r.BodyBlob)
		if err != nil {
			return nil, err
		}
		if int64(b.Len()) > s.maxRequest {
			return nil, errors.New("body blob exceeds max_request_bytes")
		}
		raw, _ = io.ReadAll(b.Reader())
	}
	var body any = string(raw)
	if json.Valid(raw) {
		if v, err := kernel.DecodeJSONValue(raw); err == nil {
			body = v
		}
	}
	return map[string]any{"request": map[string]any{
		"method":  strings.ToUpper(r.Method),
		"path":    u.Path,
		"query":   query,
		"headers": headers,
		"body":    body,
	}}, nil
}
