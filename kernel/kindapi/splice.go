package kindapi

import (
	"strconv"
	"strings"

	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// SplicePrefix begins a splice placeholder, abi.SplicePlaceholder(i):
// "{{mandate:splice:i}}".
const SplicePrefix = "{{mandate:splice:"

// Substitute replaces every splice placeholder in s with enc(vals[i]), for
// a kind that splices blobs (net into a request, llm into a prompt). It
// scans s once, left to right; substituted bytes are never scanned again,
// so a blob cannot smuggle in a placeholder. An unterminated placeholder,
// or one naming no value, is EINVAL, with what (e.g. "net: fetch") before
// the message.
func Substitute(s string, vals [][]byte, enc func([]byte) string, what string) (string, error) {
	if !strings.Contains(s, SplicePrefix) {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, SplicePrefix)
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		rest := s[i+len(SplicePrefix):]
		j := strings.Index(rest, "}}")
		if j < 0 || j > 4 {
			return "", Errorf(abi.EINVAL, "%s: unterminated splice placeholder", what)
		}
		n, err := strconv.Atoi(rest[:j])
		if err != nil || n < 0 || n >= len(vals) || strconv.Itoa(n) != rest[:j] {
			return "", Errorf(abi.EINVAL, "%s: splice placeholder %q names no spliced blob (have %d)", what, rest[:j], len(vals))
		}
		b.WriteString(enc(vals[n]))
		s = rest[j+2:]
	}
}
