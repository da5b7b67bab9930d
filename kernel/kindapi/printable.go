package kindapi

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxShown bounds each value shown to an approver.
const MaxShown = 512

// Printable returns s as it may be shown on a terminal: control
// characters (C0, DEL, C1), invalid UTF-8 and bidirectional overrides are
// escaped as Go escapes, and anything past MaxShown bytes is cut and
// marked. Everything a guest can influence goes through it before a person
// reads it.
func Printable(s string) string {
	var b strings.Builder
	for i, r := range s {
		if b.Len() >= MaxShown {
			fmt.Fprintf(&b, "... (%d bytes)", len(s))
			break
		}
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
