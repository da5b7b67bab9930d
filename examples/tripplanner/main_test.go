package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/mandatevm/mandate/internal/testengine"
)

// TestTripPlanner runs the example as `go run ./examples/tripplanner`
// does; plan checks the story itself.
func TestTripPlanner(t *testing.T) {
	t.Setenv("MANDATE_ENGINE", testengine.Name())
	var out, errs bytes.Buffer
	if err := plan(context.Background(), &out, &errs, t.TempDir()); err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, &out, &errs)
	}
}
