package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/mandatevm/mandate/internal/testengine"
)

// TestChatSummary runs the story as `go run ./examples/chatsummary` does,
// on the engine under test: the honest summary is sent, every message
// carrying the planted link or address is refused.
func TestChatSummary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the two agents and runs them")
	}
	t.Setenv("MANDATE_ENGINE", testengine.Name())
	var out, errs bytes.Buffer
	if err := story(context.Background(), &out, &errs, t.TempDir()); err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, &out, &errs)
	}
	t.Logf("\n%s", &out)
}
