package kindapi

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxShown bounds each value shown to an approver.
const MaxShown = 512

// Printable returns s as it may be shown on a terminal, on one line:
// control characters (C0 including newlines, DEL, C1), invalid UTF-8 and
// bidirectional overrides are escaped as Go escapes, and anything past
// MaxShown bytes is cut and marked. Everything a guest can influence goes
// through it (or EscapeText) before a person reads it.
func Printable(s string) string {
	p, _ := escape(s, MaxShown, false)
	return p
}

// PrintableCut is Printable, and whether s was cut to be shown.
func PrintableCut(s string) (string, bool) { return escape(s, MaxShown, false) }

// EscapeText is Printable for a text of any length and many lines: newlines
// and tabs are kept, nothing is cut.
func EscapeText(s string) string {
	p, _ := escape(s, -1, true)
	return p
}

// escape escapes s, cut past limit bytes (none when limit < 0), and
// reports whether it was cut.
func escape(s string, limit int, lines bool) (string, bool) {
	clean := true
	for i, r := range s {
		if needsEscape(s, i, r, lines) {
			clean = false
			break
		}
	}
	if clean && (limit < 0 || len(s) <= limit) {
		return s, false
	}
	var b strings.Builder
	for i, r := range s {
		if limit >= 0 && b.Len() >= limit {
			fmt.Fprintf(&b, "... (%d bytes)", len(s))
			return b.String(), true
		}
		switch {
		case !needsEscape(s, i, r, lines):
			b.WriteRune(r)
		case r == utf8.RuneError:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
	}
	return b.String(), false
}

// needsEscape reports whether the rune r at s[i] must not reach a terminal
// as it is.
func needsEscape(s string, i int, r rune, lines bool) bool {
	switch {
	case r == utf8.RuneError:
		return !strings.HasPrefix(s[i:], "\uFFFD")
	case lines && (r == '\n' || r == '\t'):
		return false
	}
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}
