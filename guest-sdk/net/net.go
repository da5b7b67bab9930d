// Package net gives Mandate guests HTTP through a net capability: the
// kernel performs the request within the capability's scope (origin,
// methods, paths, limits) and injects any secret headers itself.
//
// Guest code can keep using net/http:
//
//	client, err := net.NewClient("flights") // the manifest's cap name
//	resp, err := client.Get("https://flights.example/search?from=SFO")
//
// or call the capability directly:
//
//	resp, err := net.Fetch(flights, abi.HTTPRequest{Method: "GET", URL: "/search"})
//
// A plain http.Get, or http.DefaultClient, reaches nothing: a guest has no
// sockets, and the dial fails with "connect: Connection refused" even when
// a server listens at the address. Requests go through a client of this
// package, on a capability the manifest grants.
package net

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// Fetch performs req on the net capability c and decodes the response.
func Fetch(c mandate.Cap, req abi.HTTPRequest) (abi.HTTPResponse, error) {
	blob, err := FetchBlob(c, req)
	if err != nil {
		return abi.HTTPResponse{}, err
	}
	defer blob.Drop()
	b, err := blob.Bytes()
	if err != nil {
		return abi.HTTPResponse{}, err
	}
	return abi.DecodeHTTPResponse(b)
}

// FetchBlob performs req and returns the response as an unread blob, to
// pass on without reading it (reading raises this task's label).
func FetchBlob(c mandate.Cap, req abi.HTTPRequest) (mandate.Blob, error) {
	args, err := abi.EncodeHTTPRequest(req)
	if err != nil {
		return mandate.Blob{}, err
	}
	return c.Call(abi.NetFetchOp, args)
}

// Transport is an http.RoundTripper backed by a net capability. Requests
// must name the capability's origin (or only a path); the kernel refuses
// everything else.
type Transport struct {
	Cap mandate.Cap
}

var _ http.RoundTripper = (*Transport)(nil)

// RoundTrip implements http.RoundTripper. Kernel refusals come back as
// errors whose errno errors.Is matches, e.g. errors.Is(err, abi.EDENIED).
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		var err error
		body, err = io.ReadAll(io.LimitReader(r.Body, abi.MaxArgLen))
		r.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	u := *r.URL
	u.Fragment = ""
	req := abi.HTTPRequest{
		Method: r.Method,
		URL:    u.String(),
		Header: map[string][]string(r.Header.Clone()),
		Body:   body,
	}
	if req.Method == "" {
		req.Method = http.MethodGet
	}
	resp, err := Fetch(t.Cap, req)
	if err != nil {
		return nil, fmt.Errorf("mandate net: %s %s: %w", req.Method, r.URL.Redacted(), err)
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", resp.Status, http.StatusText(resp.Status)),
		StatusCode:    resp.Status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header(resp.Header),
		Body:          io.NopCloser(bytes.NewReader(resp.Body)),
		ContentLength: int64(len(resp.Body)),
		Request:       r,
	}, nil
}

// NewClient returns an http.Client over the capability granted under name.
// The kernel follows redirects itself (only within scope), so the client
// does not.
func NewClient(name string) (*http.Client, error) {
	c, err := mandate.Lookup(name)
	if err != nil {
		return nil, err
	}
	return &http.Client{
		Transport: &Transport{Cap: c},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}, nil
}
