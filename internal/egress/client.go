package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ParseBaseURL validates the base URL of a service a kind sends to (a
// payment provider, a model's endpoint): http or https, a host, no
// userinfo (credentials belong where the kernel keeps secrets: secretField
// names it), no query or fragment. The scheme and host are lower-cased and
// the path kept without a trailing slash.
func ParseBaseURL(s, secretField string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("not a URL: %v", err)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%s: scheme must be http or https", quote(s))
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("%s has no host", quote(s))
	case u.User != nil:
		return nil, fmt.Errorf("%s has userinfo; put credentials in %s", quote(s), secretField)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Errorf("%s has a query or fragment", quote(s))
	}
	u.Host = strings.ToLower(u.Host)
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// Client returns the HTTP client of a kind that sends to one service: it
// dials through Dialer (a refusal reads "PREFIX: endpoint ADDRESS is ..."
// and stays a *Denied for errors.As), uses no environment proxy, keeps no
// cookies, and follows no redirect (redirect is the error a redirect
// fails with: nothing is re-sent elsewhere).
func Client(allowPrivate bool, prefix string, redirect error) *http.Client {
	dial := Dialer(nil, allowPrivate, 10*time.Second)
	dialContext := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		var d *Denied
		if errors.As(err, &d) {
			return nil, fmt.Errorf("%s %w", prefix, d)
		}
		return c, err
	}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                  nil, // never an environment proxy
			DialContext:            dialContext,
			ForceAttemptHTTP2:      true,
			TLSHandshakeTimeout:    10 * time.Second,
			MaxIdleConns:           16,
			IdleConnTimeout:        90 * time.Second,
			MaxResponseHeaderBytes: 64 << 10,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return redirect },
	}
}

func quote(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "..."
	}
	return strconv.Quote(s)
}
