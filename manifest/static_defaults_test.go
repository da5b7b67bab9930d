package manifest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/sandbox"
)

// TestStaticDefaultsDocumented: the grammars give the defaults the engines
// apply (sandbox.DefaultStaticLimits, DefaultCompileMemory), and every
// default is within the manifest's range.
func TestStaticDefaultsDocumented(t *testing.T) {
	d := sandbox.DefaultStaticLimits
	for _, c := range []struct {
		attr    string
		def     string
		value   int64
		max     int64
		isBytes bool
	}{
		{"functions", fmt.Sprint(d.Functions), int64(d.Functions), MaxFunctions, false},
		{"locals", fmt.Sprint(d.Locals), int64(d.Locals), MaxLocals, false},
		{"nesting", fmt.Sprint(d.Nesting), int64(d.Nesting), MaxNesting, false},
		{"br_table_targets", fmt.Sprint(d.BrTableTargets), int64(d.BrTableTargets), MaxBrTableTargets, false},
		{"function_size", "1MiB", int64(d.BodySize), MaxFunctionSize, true},
		{"compile_memory", "1GiB", sandbox.DefaultCompileMemory, MaxCompileMemory, true},
	} {
		if c.isBytes {
			if n, err := ParseSize(c.def); err != nil || int64(n) != c.value {
				t.Errorf("%s: the documented default %s is not %d bytes", c.attr, c.def, c.value)
			}
		}
		if c.value < 1 || c.value > c.max {
			t.Errorf("%s: the default %d is outside 1 to %d", c.attr, c.value, c.max)
		}
		for name, g := range map[string]string{"Grammar": Grammar, "PolicyGrammar": PolicyGrammar} {
			if !strings.Contains(g, c.attr) || !strings.Contains(g, "(default "+c.def+")") {
				t.Errorf("%s does not give %s's default as %q", name, c.attr, "(default "+c.def+")")
			}
		}
	}
}
