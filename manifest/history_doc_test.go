package manifest_test

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/mandatevm/mandate/caps/net"
	"github.com/mandatevm/mandate/constraint"
	"github.com/mandatevm/mandate/kernel"
)

// TestHistoryDocExamples: every `when = "..."` example of history in
// constraints, in this package's doc and in the README, compiles as a
// net capability's constraint (the twin of kernel/history_test.go's
// rules, which run them).
func TestHistoryDocExamples(t *testing.T) {
	line := regexp.MustCompile(`when = ("(?:[^"\\]|\\.)*")`)
	vars := kernel.ConstraintVars(net.New())
	c := constraint.New()
	for _, file := range []string{"doc.go", "../README.md"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, m := range line.FindAllSubmatch(b, -1) {
			src, err := strconv.Unquote(string(m[1]))
			if err != nil {
				t.Fatalf("%s: %s: %v", file, m[1], err)
			}
			if !regexp.MustCompile(`\buses\b`).MatchString(src) {
				continue
			}
			n++
			if _, err := c.Compile(src, vars); err != nil {
				t.Errorf("%s: %s does not compile: %v", file, src, err)
			}
		}
		if n < 5 {
			t.Errorf("%s: %d examples reading uses, want the 5 rules", file, n)
		}
	}
}
