package main

import (
	"context"
	"testing"

	"github.com/mandatevm/mandate/internal/lifecycle"
)

// TestExtism runs a few tasks of each of Extism's guests, and the idle
// measurement: each call must return its input.
func TestExtism(t *testing.T) {
	ctx := context.Background()
	e, err := newExtism(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	for _, g := range lifecycle.Guests {
		if _, err := e.run(ctx, g, 4, 2); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.idleRSS(ctx, 2); err != nil {
		t.Fatal(err)
	}
}
