// Package httpservice is the dialing shell of the capability kinds that
// call one HTTP service on a guest's behalf (llm's model endpoint, pay's
// payment provider): the pair of clients they send through, the JSON POST
// they build, what a failed send reads as to the guest, and the bounded
// read of an answer. The kinds keep what is theirs: the request's body and
// headers, the answer's meaning, and what a refusal by the service is.
//
// The clients are the egress guard's (egress.Client): no environment
// proxy, no cookies, no redirects followed, every address resolved once
// and checked, and only the checked address dialled. One client dials
// public addresses only; the other serves grants with allow_private.
//
// The kinds are independent of each other (deps_test.go), so the shell is
// below both, beside the egress guard, and knows neither.
package httpservice

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/egress"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Clients is a kind's pair of HTTP clients.
type Clients struct {
	public  *http.Client // dials public addresses only
	private *http.Client // for grants with allow_private
}

// NewClients returns the clients of a kind. prefix names the service in a
// refused dial ("llm: endpoint" reads "llm: endpoint address A is R and
// allow_private is false"; the refusal stays an *egress.Denied for
// errors.As); redirect is the error a redirect fails with, so nothing is
// re-sent elsewhere.
func NewClients(prefix string, redirect error) *Clients {
	return &Clients{
		public:  egress.Client(false, prefix, redirect),
		private: egress.Client(true, prefix, redirect),
	}
}

// For returns the client of a grant: the one that may dial private
// addresses only when the grant allows them.
func (c *Clients) For(allowPrivate bool) *http.Client {
	if allowPrivate {
		return c.private
	}
	return c.public
}

// CloseIdleConnections closes both clients' pooled connections.
func (c *Clients) CloseIdleConnections() {
	c.public.CloseIdleConnections()
	c.private.CloseIdleConnections()
}

// NewJSONRequest returns a POST of body to url under ctx, with
// Content-Type and Accept application/json. The caller adds its own
// headers (a key, an idempotency key).
func NewJSONRequest(ctx context.Context, url string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	return req, nil
}

// Failure says what a failed send reads as to the guest. Its messages are
// WHAT: ..., with the secret redacted wherever a transport error might
// quote it.
type Failure struct {
	What    string         // the call, first in every message: "llm: chat", "pay"
	Peer    string         // the service as the messages name it: "endpoint", "provider"
	Other   string         // what starts the message of any other failure; What when empty
	Secret  kindapi.Secret // redacted from every message
	Timeout time.Duration  // the call's timeout, named when it passed
	// NetTimeouts: a transport timeout (a TLS handshake that took too
	// long) also reads as the service not answering in time, not only
	// the call's own deadline.
	NetTimeouts bool
}

// Of translates err, from a send under ctx (the call's deadline) or from
// reading its answer, to what the guest sees:
//
//   - the egress guard refused the address: EDENIED, not performed;
//   - the service was never reached (no address, no connection): EIO, not
//     performed, "PEER unreachable, nothing was sent";
//   - the deadline passed: ETIMEDOUT, "the PEER did not answer within T";
//   - anything else: EIO. The request may have been sent, so neither of
//     the last two is "not performed".
func (f *Failure) Of(ctx context.Context, err error) error {
	var denied *egress.Denied
	switch {
	case errors.As(err, &denied):
		return kindapi.NotPerformed(kindapi.Errorf(abi.EDENIED, "%s: %s", f.What, Redact(denied.Error(), f.Secret)))
	case egress.NotSent(err):
		return kindapi.NotPerformed(kindapi.Errorf(abi.EIO, "%s: %s unreachable, nothing was sent: %s", f.What, f.Peer, Redact(err.Error(), f.Secret)))
	case ctx.Err() != nil || f.NetTimeouts && isNetTimeout(err):
		return kindapi.Errorf(abi.ETIMEDOUT, "%s: the %s did not answer within %s", f.What, f.Peer, f.Timeout)
	}
	other := f.Other
	if other == "" {
		other = f.What
	}
	return kindapi.Errorf(abi.EIO, "%s: %s", other, Redact(err.Error(), f.Secret))
}

func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// ReadAtMost reads r to its end or to n+1 bytes, whichever is first; over
// says the answer is longer than n (and raw holds its first n+1 bytes).
func ReadAtMost(r io.Reader, n int64) (raw []byte, over bool, err error) {
	raw, err = io.ReadAll(io.LimitReader(r, n+1))
	return raw, int64(len(raw)) > n, err
}

// Redact replaces every occurrence of the secret in msg with "[redacted]".
func Redact(msg string, secret kindapi.Secret) string {
	if v := secret.Value(); v != "" {
		msg = strings.ReplaceAll(msg, v, "[redacted]")
	}
	return msg
}
