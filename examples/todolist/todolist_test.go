package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/mandatevm/mandate/internal/testengine"
)

// TestTodoList runs the example as `go run ./examples/todolist` does,
// with a fresh bank and state directory per agent: the honest agent's plan
// is approved once and carried out; the hijacked agent's payments beyond
// the plan are each asked about and refused.
func TestTodoList(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the two agents and runs them")
	}
	t.Setenv("MANDATE_ENGINE", testengine.Name())
	var out, errs bytes.Buffer
	if err := story(context.Background(), &out, &errs, ""); err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, &out, &errs)
	}
	t.Logf("\n%s", &out)
}
