package kernel_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// TestFlowAtSinks: a task may forward a blob by handle only to a sink
// cleared for it, and once it has read the blob, it may send nothing to a
// sink that is not.
func TestFlowAtSinks(t *testing.T) {
	e := newEnv(t)
	spec := e.spec(t, "flow", kernel.Limits{}, "passport X1234567")
	spec.InputLabel = kindapi.NewLabel([]string{"pii:alice"}, nil)
	grant := func(s string) kindapi.Scope {
		sc, err := e.k.Grant("test", kindapi.GrantContext{}, []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	spec.Grants = []kernel.GrantSpec{
		{Name: "public", Kind: "test", Scope: grant(`{"level":1,"clearance":[]}`)},
		{Name: "cleared", Kind: "test", Scope: grant(`{"level":1,"clearance":["pii:alice"]}`)},
	}
	task, err := e.k.Run(context.Background(), spec)
	if err != nil {
		t.Fatalf("%v\n%s", err, task.Stderr())
	}
	got := resultMap(t, task)
	for k, want := range map[string]string{
		"input":                   "ESUCCESS",
		"splice_unread_public":    "EFLOW",
		"splice_unread_cleared":   "ESUCCESS",
		"echo_public_before_read": "ESUCCESS",
		"read":                    "ESUCCESS",
		"echo_public_after_read":  "EFLOW",
		"echo_cleared_after_read": "ESUCCESS",
		"splice_rewrapped_public": "EFLOW",
		"widen_clearance":         "EDENIED",
	} {
		if got[k] != want {
			t.Errorf("%s: got %s, want %s", k, got[k], want)
		}
	}
	if l := task.Label().Conf(); len(l) != 1 || l[0] != "pii:alice" {
		t.Errorf("label after reading = %v, want [pii:alice]", l)
	}
	// Exactly the allowed calls reached the kind: two splices refused,
	// one echo refused.
	if n := e.kind.Calls.Load(); n != 3 {
		t.Errorf("kind saw %d calls, want 3 (splice cleared, echo before, echo cleared)", n)
	}
}

// A task cleared for public data only cannot even hold a pii blob.
func TestClearanceBoundsWhatATaskHolds(t *testing.T) {
	e := newEnv(t)
	spec := e.spec(t, "well-behaved", kernel.Limits{}, "passport")
	spec.InputLabel = kindapi.NewLabel([]string{"pii:alice"}, nil)
	public := kindapi.NewLabel(nil, nil)
	spec.Clearance = &public
	if _, err := e.k.Start(context.Background(), spec); !errors.Is(err, kindapi.ErrFlow) {
		t.Fatalf("start with an input above the clearance: %v, want ErrFlow", err)
	}
	cleared := kindapi.NewLabel([]string{"pii:alice"}, nil)
	spec.Clearance = &cleared
	if _, err := e.k.Run(context.Background(), spec); err != nil {
		t.Fatalf("cleared: %v", err)
	}
}
