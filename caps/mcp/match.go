package mcp

import (
	"net/textproto"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/mandatevm/mandate/kernel/kindapi"
)

// glob reports whether name matches pattern, where "*" matches any run of
// characters (none included) and every other character itself.
func glob(pattern, name string) bool {
	// Iterative matching with one backtrack point: linear in practice,
	// and bounded by len(pattern)*len(name) whatever the input.
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case p < len(pattern) && pattern[p] == name[n]:
			p++
			n++
		case star >= 0:
			p = star + 1
			mark++
			n = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// matchAny reports whether some pattern of ps matches name.
func matchAny(ps []string, name string) bool {
	for _, p := range ps {
		if glob(p, name) {
			return true
		}
	}
	return false
}

// resourceAllowed reports whether a resource URI is one the patterns pass
// through. A URI with a dot segment ("." or "..", percent-encoded or not,
// after a "/" or a "\\") never is: "*" matches any text, so a pattern such as
// "file:///data/reports/*" would otherwise match
// "file:///data/reports/../private/b.txt", which a server resolves outside
// the folder the pattern names.
func resourceAllowed(ps []string, uri string) bool {
	return !hasDotSegment(uri) && matchAny(ps, uri)
}

// hasDotSegment reports whether uri has a "." or ".." segment, its dots
// written as they are or percent-encoded (%2e, in either case), segments
// being separated by "/" or "\\", or either percent-encoded (a server may
// decode them before it resolves the path).
func hasDotSegment(uri string) bool {
	if i := strings.IndexAny(uri, "?#"); i >= 0 {
		uri = uri[:i]
	}
	uri = strings.NewReplacer("%2f", "/", "%2F", "/", "%5c", "/", "%5C", "/").Replace(uri)
	for _, seg := range strings.FieldsFunc(uri, func(r rune) bool { return r == '/' || r == '\\' }) {
		seg = strings.ReplaceAll(strings.ToLower(seg), "%2e", ".")
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// covered reports whether every name pattern c matches is matched by some
// pattern of ps: some pattern of ps matches c itself, read literally (each
// "*" of c is then taken up by a "*" of that pattern, which matches
// whatever the "*" of c stands for).
func covered(ps []string, c string) bool { return matchAny(ps, c) }

// literalPrefix is the part of a pattern before its first "*".
func literalPrefix(p string) string {
	if i := strings.IndexByte(p, '*'); i >= 0 {
		return p[:i]
	}
	return p
}

// moreSpecific reports whether pattern a names what it matches more
// specifically than b: an exact name over a pattern, then the longest
// literal prefix, then the longer pattern, then the first in order.
func moreSpecific(a, b string) bool {
	ea, eb := !strings.Contains(a, "*"), !strings.Contains(b, "*")
	if ea != eb {
		return ea
	}
	if la, lb := len(literalPrefix(a)), len(literalPrefix(b)); la != lb {
		return la > lb
	}
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a < b
}

// header is a header the kernel adds to every request to a url server.
type header struct {
	name   string         // canonical MIME form
	value  kindapi.Secret // the whole value, prefix included
	source string         // "env:NAME" or "file:PATH": where it was read
	// probe is what a result must not contain: the raw secret (without
	// the prefix) when it is at least minProbeLen bytes, else the whole
	// value when that is, else nothing.
	probe kindapi.Secret
}

// envVar is a variable a stdio server is started with.
type envVar struct {
	name  string
	value kindapi.Secret // it may be a credential: never shown
}

// minProbeLen is the shortest secret the result check looks for.
const minProbeLen = 8

func canonHeaderName(name string) (string, bool) {
	if !httpguts.ValidHeaderFieldName(name) {
		return "", false
	}
	return textproto.CanonicalMIMEHeaderKey(name), true
}

func validHeaderValue(v string) bool { return httpguts.ValidHeaderFieldValue(v) }

// reservedHeader reports whether a grant may not set header name: the
// transport's framing, and the MCP protocol's own headers.
func reservedHeader(name string) bool {
	switch name {
	case "Connection", "Content-Length", "Content-Type", "Accept", "Host", "Keep-Alive", "Te", "Trailer",
		"Transfer-Encoding", "Upgrade", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-Id":
		return true
	}
	return strings.HasPrefix(name, "Proxy-")
}
