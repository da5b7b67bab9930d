package manifest

import (
	"slices"
	"strings"
	"testing"
)

// TestResultRefusesTaints: result { refuses_taints } reads taints and
// prefixes, canonical and sorted, beside accepts_untrusted; a bad pattern
// is an error at its position saying what is wrong.
func TestResultRefusesTaints(t *testing.T) {
	parse := taskParser(t)
	m, err := parse("  result {\n    refuses_taints = [\"web:*\", \"reviews:hotels\", \"web:*\"]\n  }\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.RefusedResultTaints.List(); !slices.Equal(got, []string{"reviews:hotels", "web:*"}) || m.RefuseTaintedResult {
		t.Errorf("refuses_taints read as %v (accepts_untrusted false: %v), want [reviews:hotels web:*]", got, m.RefuseTaintedResult)
	}
	m, err = parse("  result {\n    accepts_untrusted = false\n    refuses_taints = \"web:*\"\n  }\n")
	if err != nil || !m.RefuseTaintedResult || !slices.Equal(m.RefusedResultTaints.List(), []string{"web:*"}) {
		t.Errorf("both: %v, %v", m, err)
	}
	if m, err := parse("  result {\n    refuses_taints = []\n  }\n"); err != nil || !m.RefusedResultTaints.IsZero() {
		t.Errorf("an empty list: %v, %v", m, err)
	}
	for _, c := range []struct{ body, want string }{
		{"  result {\n    refuses_taints = [\"a*b\"]\n  }\n", `t.hcl:5,22: refuses_taints: refused taint "a*b": "*" may only end a pattern`},
		{"  result {\n    refuses_taints = [\"\"]\n  }\n", "t.hcl:5,22: refuses_taints: a refused taint must not be empty"},
		{"  result {\n    refuses_taints = [\" web:*\"]\n  }\n", "leading or trailing space"},
		{"  result {\n    refuses_taints = [1]\n  }\n", `t.hcl:5,22: refuses_taints must be a list of taints or prefixes ending in "*"`},
		{"  result {\n    refuses_taints = true\n  }\n", "refuses_taints must be a list"},
	} {
		_, err := parse(c.body)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error with %q", c.body, err, c.want)
		}
	}
}
