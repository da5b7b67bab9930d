package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/internal/testengine"
)

// TestQuickstart runs the walkthrough exactly as `go run
// ./examples/quickstart` does, recording into a temporary state dir.
func TestQuickstart(t *testing.T) {
	t.Setenv("MANDATE_ENGINE", testengine.Name())
	var out, errs bytes.Buffer
	if err := quickstart(context.Background(), &out, &errs, t.TempDir()); err != nil {
		t.Fatalf("quickstart: %v\nstdout:\n%s\nstderr:\n%s", err, &out, &errs)
	}
	if got := strings.Count(out.String(), "denied"); got < 4 {
		t.Errorf("output says denied %d times, want one per refused call (4)\n%s", got, &out)
	}
	if !strings.Contains(out.String(), "[revoked]") {
		t.Errorf("graph does not show the revoked capability:\n%s", &out)
	}
}
