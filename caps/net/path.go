package net

import (
	"strings"
	"unicode/utf8"
)

// Request paths are checked and sent in one canonical form, so the server
// sees exactly the path the kernel matched. canonPath produces it:
//
//  1. The path must start with '/'. Control characters and spaces are
//     invalid (EINVAL); a literal backslash, or an escape that decodes to
//     '/' or '\' (%2F, %5C), is refused outright (EDENIED): servers
//     disagree on what they mean, and a prefix check cannot be sound
//     while they do.
//  2. Percent-escapes are normalised as RFC 3986 section 6.2.2 says:
//     escapes of unreserved characters (ALPHA DIGIT - . _ ~) are decoded,
//     so "%2e" is ".", other escapes are kept with upper-case hex, and any
//     byte that may not appear in a path (non-ASCII, '"', '<', '{'...) is
//     escaped. A malformed escape is EINVAL.
//  3. Dot segments are resolved and empty segments ("//") dropped, as
//     path.Clean does; ".." never climbs above "/". A trailing slash is
//     kept.
//  4. Segments that some servers read as dot segments but the steps above
//     do not are refused (EDENIED): a "." or ".." followed by ';' or an
//     escape ("..;", "..%00", ".%3B"), and double-encoded escapes ("%252e").
//
// Prefixes are matched on segment boundaries: prefix "/search" allows
// "/search" and "/search/x" but not "/searchadmin"; prefix "/search/"
// allows "/search/x" but not "/search".

// pathError is why a path was refused; denied distinguishes EDENIED (a
// path that might escape its prefix) from EINVAL (one that is malformed).
type pathError struct {
	denied bool
	msg    string
}

func (e *pathError) Error() string { return e.msg }

func invalidPath(msg string) error { return &pathError{msg: msg} }
func deniedPath(msg string) error  { return &pathError{denied: true, msg: msg} }

const upperHex = "0123456789ABCDEF"

func isUnreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// isPathChar reports whether c may appear literally in a canonical path
// segment: RFC 3986 pchar minus pct-encoded (unreserved, sub-delims, ':',
// '@').
func isPathChar(c byte) bool {
	if isUnreserved(c) {
		return true
	}
	switch c {
	case '!', '$', '&', '\'', '(', ')', '*', '+', ',', ';', '=', ':', '@':
		return true
	}
	return false
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// canonPath returns the canonical form of a request path (no query) or a
// *pathError.
func canonPath(p string) (string, error) {
	if p == "" || p[0] != '/' {
		return "", invalidPath("path must start with /")
	}
	if !decodedUTF8(p) {
		// Overlong encodings such as %c0%ae decode to "." on servers that
		// accept them (CVE-2008-2938): refuse every invalid sequence.
		return "", deniedPath("path is not valid UTF-8 once decoded (overlong or broken encodings are refused)")
	}
	var segs []string
	var seg strings.Builder
	trailing := false
	flush := func() error {
		s := seg.String()
		seg.Reset()
		trailing = false
		switch s {
		case "", ".":
			trailing = true
			return nil
		case "..":
			if len(segs) > 0 {
				segs = segs[:len(segs)-1]
			}
			trailing = true
			return nil
		}
		t := strings.TrimLeft(s, ".")
		if n := len(s) - len(t); n >= 1 && n <= 2 && t != "" && (t[0] == ';' || t[0] == '%') {
			return deniedPath("ambiguous dot segment " + quoteTrunc(s) + " in path")
		}
		if hasDoubleEscape(s) {
			return deniedPath("double-encoded escape (%25XX) in path")
		}
		segs = append(segs, s)
		return nil
	}
	for i := 1; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '/':
			if err := flush(); err != nil {
				return "", err
			}
			continue
		case c == '\\':
			return "", deniedPath("backslash in path")
		case c <= ' ' || c == 0x7f:
			return "", invalidPath("control character or space in path")
		case c == '?' || c == '#':
			return "", invalidPath("query or fragment in path")
		case c == '%':
			if i+2 >= len(p) {
				return "", invalidPath("truncated percent-escape in path")
			}
			hi, ok1 := unhex(p[i+1])
			lo, ok2 := unhex(p[i+2])
			if !ok1 || !ok2 {
				return "", invalidPath("bad percent-escape in path")
			}
			i += 2
			d := hi<<4 | lo
			switch {
			case d == '/' || d == '\\':
				return "", deniedPath("encoded slash or backslash (%2F, %5C) in path")
			case isUnreserved(d):
				seg.WriteByte(d)
			default:
				seg.WriteByte('%')
				seg.WriteByte(upperHex[d>>4])
				seg.WriteByte(upperHex[d&15])
			}
			continue
		case isPathChar(c):
			seg.WriteByte(c)
		default:
			seg.WriteByte('%')
			seg.WriteByte(upperHex[c>>4])
			seg.WriteByte(upperHex[c&15])
		}
	}
	// The last segment: "/a/b" ends in "b" (no trailing slash), "/a/b/"
	// in "" (trailing slash); flush sets trailing accordingly.
	if err := flush(); err != nil {
		return "", err
	}
	out := "/" + strings.Join(segs, "/")
	if trailing && len(segs) > 0 {
		out += "/"
	}
	return out, nil
}

// decodedUTF8 reports whether p, with its well-formed percent-escapes
// decoded, is valid UTF-8.
func decodedUTF8(p string) bool {
	b := make([]byte, 0, len(p))
	for i := 0; i < len(p); i++ {
		if p[i] == '%' && i+2 < len(p) {
			hi, ok1 := unhex(p[i+1])
			lo, ok2 := unhex(p[i+2])
			if ok1 && ok2 {
				b = append(b, hi<<4|lo)
				i += 2
				continue
			}
		}
		b = append(b, p[i])
	}
	return utf8.Valid(b)
}

// hasDoubleEscape reports whether canonical segment s holds "%25" followed
// by two hex digits: an escape that a server decoding twice would decode.
func hasDoubleEscape(s string) bool {
	for i := 0; i+5 <= len(s); i++ {
		if s[i:i+3] == "%25" {
			if _, ok := unhex(s[i+3]); ok {
				if _, ok := unhex(s[i+4]); ok {
					return true
				}
			}
		}
	}
	return false
}

// canonPrefix canonicalises a path prefix from a grant or a narrowing
// request. Unlike a request path it may not contain dot segments (a prefix
// that says "/a/../b" is a mistake, not something to resolve) or a query.
func canonPrefix(p string) (string, error) {
	if strings.ContainsAny(p, "?#") {
		return "", invalidPath("a path prefix has no query or fragment")
	}
	for _, s := range strings.Split(p, "/") {
		if d := decodeDots(s); d == "." || d == ".." {
			return "", invalidPath("a path prefix may not contain . or .. segments")
		}
	}
	return canonPath(p)
}

// decodeDots decodes %2e/%2E in s, enough to recognise dot segments.
func decodeDots(s string) string {
	s = strings.ReplaceAll(s, "%2e", ".")
	return strings.ReplaceAll(s, "%2E", ".")
}

// pathWithin reports whether canonical path p is allowed by canonical
// prefix pre, on segment boundaries. It also decides whether one prefix is
// within another: if pathWithin(P, C) then every path C allows, P allows.
func pathWithin(pre, p string) bool {
	if strings.HasSuffix(pre, "/") {
		return strings.HasPrefix(p, pre)
	}
	return p == pre || strings.HasPrefix(p, pre+"/")
}

// pathAllowed reports whether canonical path p is within some prefix.
func pathAllowed(prefixes []string, p string) bool {
	for _, pre := range prefixes {
		if pathWithin(pre, p) {
			return true
		}
	}
	return false
}
