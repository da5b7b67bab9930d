package kernel

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// fixedCompiler compiles "true", "false" and "error" to constraints that
// hold, fail and cannot be evaluated.
type fixedCompiler struct{}

type fixed struct{ src string }

func (f fixed) Source() string { return f.src }
func (f fixed) Eval(context.Context, map[string]any) (bool, error) {
	switch f.src {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, context.DeadlineExceeded
}

func (fixedCompiler) Compile(src string, _ []string) (Constraint, error) {
	if src != "true" && src != "false" && src != "error" {
		return nil, kindapi.Errorf(abi.EINVAL, "cannot compile %q", src)
	}
	return fixed{src}, nil
}

// TestDerivedConstraintsAccumulate: a derivation adds constraints; they
// bind the child and everything derived from it, never the parent, and a
// derivation cannot remove them.
func TestDerivedConstraintsAccumulate(t *testing.T) {
	k, err := New(Config{Engine: nullEngine{}, Kinds: []kindapi.Kind{nopKind{}}, Constraints: fixedCompiler{}})
	if err != nil {
		t.Fatal(err)
	}
	task := &Task{k: k, id: "t1", principal: "p", table: NewCapTable(16), names: map[string]*Cap{}, logger: hclog.NewNullLogger()}
	task.resolveBlob = task.table.GetBlob
	root, _ := k.newCap(k.kinds["nop"], nopScope{}, "c", nil, task, false, Constraints{})
	rh, _ := task.table.InsertCap(root)
	ctx := context.Background()
	call := func(h abi.Handle) abi.Errno {
		_, err := task.Invoke(ctx, h, "noop", nil)
		return kindapi.ErrnoOf(err)
	}
	child, err := task.DeriveHandle(ctx, rh, []byte(`{"when":"false"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := call(child); got != abi.EDENIED {
		t.Fatalf("child with when=false: %v, want EDENIED", got)
	}
	if got := call(rh); got != abi.ESUCCESS {
		t.Fatalf("parent after child's constraint: %v", got)
	}
	// The grandchild asks for nothing more, yet inherits the refusal.
	grand, err := task.DeriveHandle(ctx, child, []byte(`{"when":["true"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := call(grand); got != abi.EDENIED {
		t.Fatalf("grandchild: %v, want EDENIED (ancestor constraints apply)", got)
	}
	// An expression that cannot be evaluated denies.
	errc, _ := task.DeriveHandle(ctx, rh, []byte(`{"when":"error"}`))
	if got := call(errc); got != abi.EDENIED || !strings.Contains(task.LastError(), "cannot be evaluated") {
		t.Fatalf("unevaluable: %v (%s)", got, task.LastError())
	}
	// A constraint that does not compile, or is not a string, is EINVAL.
	for _, req := range []string{`{"when":"nonsense"}`, `{"when":5}`, `{"approve_when":[1]}`} {
		if _, err := task.DeriveHandle(ctx, rh, []byte(req)); kindapi.ErrnoOf(err) != abi.EINVAL {
			t.Errorf("derive %s: %v, want EINVAL", req, err)
		}
	}
	// approve_when with the default approver (deny) refuses.
	ah, _ := task.DeriveHandle(ctx, rh, []byte(`{"approve_when":"true"}`))
	if got := call(ah); got != abi.EAPPROVAL {
		t.Fatalf("approve_when true with no approver: %v, want EAPPROVAL", got)
	}
	if got := k.Graph().Caps[1].When; len(got) != 1 || got[0] != "false" {
		t.Fatalf("graph shows when %v for the child", got)
	}
}
