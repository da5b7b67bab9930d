package net

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// origin is a canonical scheme://host[:port]. It is a comparable value:
// two origins are the same origin exactly when they are ==.
type origin struct {
	scheme string // "http" or "https"
	host   string // lowercase ASCII (punycode) name, dotted IPv4, or bare IPv6
	port   uint16 // always explicit here; elided from String when default
}

// defaultPort is the port a scheme implies.
func defaultPort(scheme string) uint16 {
	if scheme == "https" {
		return 443
	}
	return 80
}

// hostPort is the authority as it goes into a URL and the Host header:
// IPv6 literals bracketed, the port elided when it is the scheme's default.
func (o origin) hostPort() string {
	h := o.host
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if o.port != defaultPort(o.scheme) {
		h += ":" + strconv.Itoa(int(o.port))
	}
	return h
}

// String is the canonical form, e.g. "https://flights.example" or
// "http://[::1]:8080".
func (o origin) String() string { return o.scheme + "://" + o.hostPort() }

// Origin errors. They describe the input's shape, never secrets (an origin
// holds none).
var (
	errOriginScheme   = errors.New("scheme must be http or https")
	errOriginUserinfo = errors.New("userinfo (user@host) is not allowed")
	errOriginEmpty    = errors.New("empty host")
)

// parseOrigin parses an origin as written in a grant: scheme://host[:port]
// with nothing after it but an optional single "/".
func parseOrigin(s string) (origin, error) {
	o, rest, err := splitOrigin(s)
	if err != nil {
		return origin{}, err
	}
	if rest != "" && rest != "/" {
		return origin{}, errors.New("an origin has no path, query or fragment (got " + quoteTrunc(rest) + ")")
	}
	return o, nil
}

// splitOrigin parses the scheme and authority at the start of an absolute
// URL and returns the canonical origin and what follows the authority (the
// path, query and fragment, starting with '/', '?' or '#', or empty).
//
// It refuses rather than guesses: userinfo, backslashes, percent-escapes in
// the authority, control characters and whitespace, empty hosts, bad ports,
// IPv6 zones, and names that fail IDNA (the strict Lookup profile, with
// STD3 rules: no underscores) are errors.
func splitOrigin(s string) (origin, string, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return origin{}, "", errors.New("control character or space in URL")
		}
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return origin{}, "", errors.New("not an absolute http(s) URL (want scheme://host)")
	}
	scheme = strings.ToLower(scheme)
	if scheme != "http" && scheme != "https" {
		return origin{}, "", errOriginScheme
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	auth, tail := rest[:end], rest[end:]
	// WHATWG parsers treat '\' as '/' in http(s) URLs, so
	// "http://evil.example\@flights.example" means different hosts to
	// different parsers. Refuse it anywhere in the authority.
	if strings.ContainsAny(auth, "\\") {
		return origin{}, "", errors.New("backslash in authority")
	}
	if strings.Contains(auth, "@") {
		return origin{}, "", errOriginUserinfo
	}
	if strings.Contains(auth, "%") {
		return origin{}, "", errors.New("percent-escape in host")
	}
	o := origin{scheme: scheme}
	var host, port string
	if strings.HasPrefix(auth, "[") {
		i := strings.IndexByte(auth, ']')
		if i < 0 {
			return origin{}, "", errors.New("unclosed [ in host")
		}
		host, port = auth[1:i], auth[i+1:]
		if port != "" && !strings.HasPrefix(port, ":") {
			return origin{}, "", errors.New("junk after ] in host")
		}
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return origin{}, "", errors.New("bad IPv6 literal (zones are not allowed)")
		}
		o.host = a.String()
	} else {
		if strings.Count(auth, ":") > 1 {
			return origin{}, "", errors.New("IPv6 literal must be in brackets")
		}
		host, port = auth, ""
		if i := strings.IndexByte(auth, ':'); i >= 0 {
			host, port = auth[:i], auth[i:]
		}
		h, err := canonHost(host)
		if err != nil {
			return origin{}, "", err
		}
		o.host = h
	}
	o.port = defaultPort(scheme)
	if port != "" {
		p := port[1:] // drop ':'
		if p == "" || len(p) > 5 || strings.Trim(p, "0123456789") != "" {
			return origin{}, "", errors.New("bad port " + quoteTrunc(p))
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return origin{}, "", errors.New("port out of range " + quoteTrunc(p))
		}
		o.port = uint16(n)
	}
	return o, tail, nil
}

// canonHost canonicalises a non-bracketed host: IDNA to punycode
// (which also lowercases and maps full-width dots), one trailing dot
// removed, then either a dotted-decimal IPv4 address or a DNS name whose
// last label is not numeric (so "127.1" and "0x7f.0.0.1", which some
// resolvers read as addresses, are refused).
func canonHost(host string) (string, error) {
	if host == "" || host == "." {
		return "", errOriginEmpty
	}
	if strings.Contains(host, ":") {
		return "", errors.New("IPv6 literal must be in brackets")
	}
	if !utf8.ValidString(host) {
		return "", errors.New("host is not valid UTF-8")
	}
	a, err := idna.Lookup.ToASCII(host)
	if err != nil {
		// The idna error quotes the input; the input is the manifest's
		// or the guest's own text, never a secret.
		return "", errors.New("host is not a valid domain name: " + err.Error())
	}
	a = strings.ToLower(strings.TrimSuffix(a, "."))
	if a == "" {
		return "", errOriginEmpty
	}
	// The canonical name must be a fixed point, or an origin would print
	// as something that parses differently.
	if again, err := idna.Lookup.ToASCII(a); err != nil || again != a {
		return "", errors.New("host is not a valid domain name after IDNA")
	}
	if ip, err := netip.ParseAddr(a); err == nil && ip.Is4() {
		return ip.String(), nil
	}
	if len(a) > 253 {
		return "", errors.New("host name longer than 253 bytes")
	}
	labels := strings.Split(a, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "", errors.New("host has an empty or over-long label")
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "", errors.New("host has a character outside [a-z0-9-] after IDNA")
			}
		}
	}
	if last := labels[len(labels)-1]; looksNumeric(last) {
		return "", errors.New("host looks like an IP address but is not dotted-decimal IPv4")
	}
	return a, nil
}

// looksNumeric reports whether a label is a number as the WHATWG IPv4
// parser reads one (decimal, or 0x hex), so a host ending in it would be
// taken for an address by some parsers.
func looksNumeric(l string) bool {
	if strings.HasPrefix(l, "0x") {
		return strings.Trim(l[2:], "0123456789abcdef") == ""
	}
	return strings.Trim(l, "0123456789") == ""
}

// quoteTrunc quotes s for an error message, cut to a readable length.
func quoteTrunc(s string) string {
	const max = 120
	if len(s) > max {
		s = s[:max] + "..."
	}
	return strconv.Quote(s)
}
