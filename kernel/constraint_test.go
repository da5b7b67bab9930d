package kernel_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/constraint"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// TestConstraintsOnCalls runs the well-behaved guest (it calls echo with
// its input as the arguments) under `when` and `approve_when` constraints.
func TestConstraintsOnCalls(t *testing.T) {
	for _, tc := range []struct {
		name        string
		when, appr  []string
		approver    kernel.Approver
		input       string
		ok          bool
		errContains string
	}{
		{"when holds", []string{"args.amount <= 50"}, nil, nil, `{"amount": 20}`, true, ""},
		{"when fails", []string{"args.amount <= 50"}, nil, nil, `{"amount": 80}`, false, "does not hold"},
		{"missing field denies", []string{"args.amount <= 50"}, nil, nil, `{"total": 20}`, false, "cannot be evaluated"},
		{"every when must hold", []string{"args.amount <= 50", `args.to in ["bob"]`}, nil, nil, `{"amount": 20, "to": "eve"}`, false, "does not hold"},
		{"approve_when yes", nil, []string{"args.amount > 10"}, kernel.ApproverFunc(func(context.Context, kernel.ApprovalRequest) (bool, error) { return true, nil }), `{"amount": 20}`, true, ""},
		{"approve_when no", nil, []string{"args.amount > 10"}, kernel.DenyAll, `{"amount": 20}`, false, "approval refused"},
		{"approve_when not matching", nil, []string{"args.amount > 10"}, kernel.DenyAll, `{"amount": 5}`, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t, func(c *kernel.Config) {
				c.Constraints, c.Approver = constraint.New(), tc.approver
			})
			k, kind := e.k, e.kind
			var err error
			spec := e.spec(t, "well-behaved", kernel.Limits{}, tc.input)
			spec.Grants[0].Scope, _ = k.Grant("test", kindapi.GrantContext{}, []byte(`{"level":5}`))
			spec.Grants[0].Constraints, err = k.CompileConstraints("test", tc.when, tc.appr)
			if err != nil {
				t.Fatal(err)
			}
			task, err := k.Run(ctx, spec)
			if tc.ok {
				if err != nil {
					t.Fatalf("run: %v", err)
				}
				if kind.Calls.Load() != 1 {
					t.Fatalf("kind saw %d calls, want 1", kind.Calls.Load())
				}
				return
			}
			if err == nil {
				t.Fatal("run succeeded, want the call refused")
			}
			if !strings.Contains(task.LastError(), tc.errContains) {
				t.Fatalf("last error %q, want %q", task.LastError(), tc.errContains)
			}
			if kind.Calls.Load() != 0 {
				t.Fatalf("a refused call reached the kind (%d calls)", kind.Calls.Load())
			}
		})
	}
}

func TestCompileConstraintsErrors(t *testing.T) {
	k := newEnv(t, func(c *kernel.Config) { c.Constraints = constraint.New() }).k
	if _, err := k.CompileConstraints("test", []string{"args.amount <="}, nil); err == nil {
		t.Fatal("a syntax error compiled")
	}
	if _, err := k.CompileConstraints("test", []string{"request.amount > 1"}, nil); err == nil {
		t.Fatal("an undeclared variable compiled")
	}
	none := newEnv(t).k
	if _, err := none.CompileConstraints("test", []string{"true"}, nil); err == nil {
		t.Fatal("constraints without a compiler were accepted")
	}
}
