package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/mandatevm/mandate/internal/testengine"
)

// TestStayBooker runs the example as `go run ./examples/staybooker` does,
// with compromised and with obedient models; story checks each.
func TestStayBooker(t *testing.T) {
	t.Setenv("MANDATE_ENGINE", testengine.Name())
	for _, compromised := range []bool{true, false} {
		var out, errs bytes.Buffer
		if err := story(context.Background(), &out, &errs, t.TempDir(), compromised); err != nil {
			t.Fatalf("compromised=%v: %v\nstdout:\n%s\nstderr:\n%s", compromised, err, &out, &errs)
		}
		t.Logf("compromised=%v:\n%s", compromised, &out)
	}
}
