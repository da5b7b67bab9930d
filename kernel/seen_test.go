package kernel_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/constraint"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// TestGivenSeenOnCalls: the well-behaved guest reads its input (labelled
// web:news.example) and calls echo with it; given() finds the input's
// values, seen() the values of what the task read, by taint pattern.
func TestGivenSeenOnCalls(t *testing.T) {
	const input = `{"text": "Summary: see https://Evil.example/win or write to Eve@evil.example"}`
	for _, tc := range []struct {
		name  string
		when  string
		label kindapi.Label
		ok    bool
	}{
		{"given: every URL was in the input", `urls(args.text).all(u, given(u))`, kindapi.Label{}, true},
		{"given: the address was in the input", `emails(args.text).all(a, given(a))`, kindapi.Label{}, true},
		{"given: a value not in the input", `given("https://other.example/")`, kindapi.Label{}, false},
		{"seen: read from a web source", `urls(args.text).all(u, seen(u, 'web:*'))`, kindapi.NewLabel(nil, []string{"web:news.example"}), true},
		{"seen: not from the bank", `urls(args.text).all(u, seen(u, 'bank:*'))`, kindapi.NewLabel(nil, []string{"web:news.example"}), false},
		{"seen: an untainted read matches no pattern", `urls(args.text).exists(u, seen(u, '*'))`, kindapi.Label{}, false},
		{"no URL from the web", `!urls(args.text).exists(u, seen(u, 'web:*'))`, kindapi.NewLabel(nil, []string{"web:news.example"}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(c *kernel.Config) { c.Constraints = constraint.New() })
			spec := e.spec(t, "well-behaved", kernel.Limits{}, input)
			spec.InputLabel = tc.label
			var err error
			spec.Grants[0].Constraints, err = e.k.CompileConstraints("test", []string{tc.when}, nil)
			if err != nil {
				t.Fatal(err)
			}
			task, err := e.k.Run(context.Background(), spec)
			if tc.ok != (err == nil) {
				t.Fatalf("run: %v (last error %q); want ok=%v", err, task.LastError(), tc.ok)
			}
			if !tc.ok && !strings.Contains(task.LastError(), "does not hold") {
				t.Fatalf("last error %q, want the constraint not holding", task.LastError())
			}
		})
	}
}
