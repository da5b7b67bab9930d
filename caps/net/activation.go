package net

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"

	"github.com/mandatevm/mandate/kernel/kindapi"
)

// vars is what a `when` or `approve_when` on a net capability sees: one
// variable, request, the request as the kernel will send it:
//
//	request.method   "POST" (upper case)
//	request.path     the canonical path, "/v1/messages"
//	request.query    {"q": "lisbon"}: each parameter's value
//	request.headers  {"Content-Type": "application/json"}: the guest's headers
//	request.body     the body parsed as JSON when it is JSON, else the body as a string ("" when empty)
//
// with spliced blobs already substituted. A query Go cannot parse, a
// parameter or header given twice with different values, or a JSON body
// a server could read differently (a duplicated key, invalid UTF-8, a
// number the constraint would not see exactly) cannot be judged: the
// constraint is unevaluable, so the call is denied. A constraint that
// reads a spliced blob tells the calling task one bit about a blob it may
// not have read (see SECURITY.md, narrow channels).
//
// So a capability can be bound to values, e.g.
//
//	request.body.recipient in ["GB29NWBK60161331926819"] && request.body.amount <= 50
func (f *fetch) vars() (map[string]any, error) {
	// Constraints judge the request as it will be sent, prepared once
	// (spliced blobs substituted), so a placeholder cannot carry a value
	// past a constraint.
	r, method, u := f.r, f.method, f.u
	// A query or header a constraint would read differently from the
	// server is refused: a query Go cannot parse (a server might), and a
	// parameter or header given twice with different values (a server may
	// take either).
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("the query cannot be judged by a constraint: %v", err)
	}
	query := map[string]any{}
	for name, vs := range q {
		v, err := single("query parameter", name, vs)
		if err != nil {
			return nil, err
		}
		query[name] = v
	}
	headers := map[string]any{}
	multi := map[string][]string{}
	for name, vs := range r.Header {
		if c, ok := canonHeaderName(name); ok {
			multi[c] = append(multi[c], vs...)
		}
	}
	for name, vs := range multi {
		if len(vs) == 0 {
			continue
		}
		v, err := single("header", name, vs)
		if err != nil {
			return nil, err
		}
		headers[name] = v
	}
	raw, _ := io.ReadAll(f.body.open())
	var body any = string(raw)
	if json.Valid(raw) {
		v, err := kindapi.DecodeJSONValue(raw)
		if err != nil {
			return nil, fmt.Errorf("the JSON body cannot be judged as a server reads it: %v", err)
		}
		body = v
	}
	return map[string]any{"request": map[string]any{
		"method":  method,
		"path":    u.Path,
		"query":   query,
		"headers": headers,
		"body":    body,
	}}, nil
}

// single returns the one value of a repeated query parameter or header, or
// an error when its values differ.
func single(what, name string, vs []string) (string, error) {
	for _, v := range vs[1:] {
		if v != vs[0] {
			return "", fmt.Errorf("%s %q is given %d times with different values; a constraint cannot judge it", what, name, len(vs))
		}
	}
	return vs[0], nil
}
