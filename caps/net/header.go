package net

import (
	"bytes"
	"net/textproto"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/mandatevm/mandate/kernel/kindapi"
)

// appearsIn reports whether the secret occurs in b.
func appearsIn(s kindapi.Secret, b []byte) bool {
	v := s.Value()
	return v != "" && bytes.Contains(b, []byte(v))
}

// appearsInFold is appearsInString ignoring case, for header names, which
// canonicalisation re-cases.
func appearsInFold(s kindapi.Secret, t string) bool {
	v := s.Value()
	return v != "" && strings.Contains(strings.ToLower(t), strings.ToLower(v))
}

func appearsInString(s kindapi.Secret, t string) bool {
	v := s.Value()
	return v != "" && strings.Contains(t, v)
}

// injected is a header the kernel adds to every request of a scope.
type injected struct {
	name  string         // canonical MIME form, e.g. "X-Api-Key"
	value kindapi.Secret // the whole value, prefix included
	// probe is what a response must not contain: the raw secret (without
	// the prefix) when it is at least minProbeLen bytes, else the whole
	// value when that is, else nothing (too short to search for without
	// false alarms).
	probe kindapi.Secret
}

// minProbeLen is the shortest secret the response check looks for.
const minProbeLen = 8

// methodOverride are headers some frameworks read as the real method.
var methodOverride = map[string]bool{
	"X-Http-Method-Override": true,
	"X-Http-Method":          true,
	"X-Method-Override":      true,
}

// rangeHeaders let a guest fetch a response in slices; with an injected
// kindapi.Secret, slices of an echo would each pass the echo check.
var rangeHeaders = map[string]bool{"Range": true, "If-Range": true}

// hopHeaders are hop-by-hop or framing headers: the transport owns them.
// Neither a guest nor a grant may set them.
var hopHeaders = map[string]bool{
	"Connection":          true,
	"Content-Length":      true,
	"Host":                true,
	"Keep-Alive":          true,
	"Proxy-Authenticate":  true,
	"Proxy-Authorization": true,
	"Proxy-Connection":    true,
	"Te":                  true,
	"Trailer":             true,
	"Transfer-Encoding":   true,
	"Upgrade":             true,
}

// guestForbidden reports why a guest may not set header name (canonical
// form), or "" when it may. Injected and dropped header names are checked
// separately.
func guestForbidden(name string) string {
	switch {
	case hopHeaders[name] || strings.HasPrefix(name, "Proxy-"):
		return "is a hop-by-hop or framing header the transport sets"
	case name == "Accept-Encoding":
		// The transport negotiates compression and decompresses, so the
		// kernel checks what the guest will read; a guest-chosen encoding
		// would hide an echoed secret from that check.
		return "is negotiated by the kernel's transport"
	case methodOverride[name]:
		return "overrides the request method on some servers; the capability's methods are the only ones allowed"
	case name == "Cookie":
		// The capability is stateless: no jar, Set-Cookie is stripped from
		// responses. A session credential belongs in an injected header.
		return "is not allowed: cookies are not part of a net capability (inject a credential header instead)"
	}
	return ""
}

// grantForbidden reports why a grant may not inject header name, or "".
func grantForbidden(name string) string {
	if hopHeaders[name] || strings.HasPrefix(name, "Proxy-") {
		return "is a hop-by-hop or framing header the transport sets"
	}
	return ""
}

// canonHeaderName validates a header name (an RFC 7230 token) and returns
// its canonical MIME form.
func canonHeaderName(name string) (string, bool) {
	if !httpguts.ValidHeaderFieldName(name) {
		return "", false
	}
	return textproto.CanonicalMIMEHeaderKey(name), true
}

// validHeaderValue reports whether v may be sent as a header value: no
// control characters other than tab, so no CR, LF or NUL.
func validHeaderValue(v string) bool { return httpguts.ValidHeaderFieldValue(v) }

// stripResponseHeaders are removed from every response before the guest
// sees it.
var stripResponseHeaders = []string{
	// Cookies a server sets may be sessions it minted from an injected
	// credential: a guest could carry them off and use them without the
	// capability. The capability has no jar; drop them.
	"Set-Cookie",
	"Set-Cookie2",
}
