package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/mcpserve"
)

// TestConformanceDocNumbers: what CONFORMANCE.md and "mandate mcp
// --help" state of the server's limits is what the code does: the idle
// timeout, the sessions live at once (and the refusal's message), the
// request size limits.
func TestConformanceDocNumbers(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "mcpserve", "CONFORMANCE.md"))
	if err != nil {
		t.Fatal(err)
	}
	// Markdown wraps lines and quotes code: one space between words.
	flat := func(s string) string { return strings.Join(strings.Fields(strings.ReplaceAll(s, "`", "")), " ") }
	doc, help := flat(string(b)), flat(mcpHelp)
	mib := func(n int) int { return n >> 20 }
	checks := []struct {
		what, text, pattern string
		want                int
	}{
		{"the idle timeout", doc, `ended after (\d+) minutes idle`, int(mcpIdleTimeout / time.Minute)},
		{"the idle timeout", help, `ended after (\d+) minutes idle`, int(mcpIdleTimeout / time.Minute)},
		{"the sessions live at once", doc, `At most (\d+) sessions live at once over HTTP`, maxMCPSessions},
		{"the sessions live at once", help, `at most (\d+) sessions live at once`, maxMCPSessions},
		{"the sessions the suite leaves", doc, `within the limit of (\d+) live at once`, maxMCPSessions},
		{"the HTTP body limit", doc, `An HTTP request body of at most (\d+) MiB`, mib(maxMCPRequest)},
		{"the stdio line limit", doc, `over stdio a line of at most (\d+) MiB`, mib(maxMCPRequest)},
		{"the arguments limit", doc, `A call's arguments of at most (\d+) MiB`, mib(mcpserve.MaxArgBytes)},
	}
	for _, c := range checks {
		m := regexp.MustCompile(c.pattern).FindStringSubmatch(c.text)
		if m == nil {
			t.Errorf("%s: no %q", c.what, c.pattern)
			continue
		}
		if got, _ := strconv.Atoi(m[1]); got != c.want {
			t.Errorf("%s: the doc says %d (%q), the code %d", c.what, got, m[0], c.want)
		}
	}
	if mcpserve.MaxArgBytes%(1<<20) != 0 || maxMCPRequest%(1<<20) != 0 {
		t.Errorf("a limit is not a whole number of MiB: the doc's numbers need another unit")
	}
	if msg := flat(errTooManySessions.Error()); !strings.Contains(doc, msg) {
		t.Errorf("CONFORMANCE.md does not quote the refusal's message %q", msg)
	}
}
