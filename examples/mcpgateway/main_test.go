package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/mandatevm/mandate/internal/testengine"
)

// TestGateway runs the example as `go run ./examples/mcpgateway` does (the
// test binary, started again, is mandate and the files server: see init);
// gateway checks every step of the sessions and what the servers received.
func TestGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mandate mcp serve and the upstream servers")
	}
	t.Setenv("MANDATE_ENGINE", testengine.Name())
	var out, errs bytes.Buffer
	if err := gateway(context.Background(), &out, &errs, t.TempDir()); err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, &out, &errs)
	}
	t.Logf("\n%s", &out)
}
