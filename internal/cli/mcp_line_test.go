package cli

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestLineLimitReader: a line of max bytes passes whole however reads
// split it, and a line of max+1 fails at its last byte, even when it
// arrives in the read that ended the line before it (the case the SDK's
// own bound misses).
func TestLineLimitReader(t *testing.T) {
	const max = 10
	for _, c := range []struct {
		name, in string
		fail     bool
	}{
		{"lines at the bound", strings.Repeat("a", max) + "\n" + strings.Repeat("b", max) + "\n", false},
		{"a line past it after a short one", "{}\n" + strings.Repeat("b", max+1) + "\n", true},
		{"past it with no newline", strings.Repeat("c", max+1), true},
		{"empty lines", "\n\n\n", false},
	} {
		for _, split := range []string{"whole", "bytewise"} {
			var r io.Reader = strings.NewReader(c.in)
			if split == "bytewise" {
				r = iotest.OneByteReader(r)
			}
			got, err := io.ReadAll(&lineLimitReader{r: io.NopCloser(r), max: max})
			if c.fail != errors.Is(err, errLineTooLong) {
				t.Errorf("%s, %s: err %v", c.name, split, err)
			}
			if !c.fail && err == nil && string(got) != c.in {
				t.Errorf("%s, %s: read %q", c.name, split, got)
			}
			for _, line := range bytes.Split(got, []byte("\n")) {
				if len(line) > max {
					t.Errorf("%s, %s: passed a line of %d bytes", c.name, split, len(line))
				}
			}
		}
	}
}
