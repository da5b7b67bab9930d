package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/mandatevm/mandate/internal/testengine"
)

// TestDesk runs the example as `go run ./examples/mcpdesk` does (the test
// binary, started again, is the server: see init); desk checks the
// session itself. With --approve no the payment above the threshold is
// refused, with yes it is paid.
func TestDesk(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the tool guests and serves them")
	}
	t.Setenv("MANDATE_ENGINE", testengine.Name())
	for _, approve := range []string{"no", "yes"} {
		t.Run("approve="+approve, func(t *testing.T) {
			var out, errs bytes.Buffer
			if err := desk(context.Background(), &out, &errs, approve, t.TempDir()); err != nil {
				t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, &out, &errs)
			}
			t.Logf("\n%s", &out)
		})
	}
}
