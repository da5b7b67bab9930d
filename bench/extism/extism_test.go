package main

import (
	"context"
	"testing"

	"github.com/mandatevm/mandate/host"
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

// TestCalls makes a few host calls on each side of the call comparison:
// each guest must report as many calls as it was asked for, and the
// table must print.
func TestCalls(t *testing.T) {
	ctx := context.Background()
	var runners []callRunner
	for _, name := range host.EngineNames() {
		r, err := newMandateCalls(ctx, name, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer r.close(ctx)
		runners = append(runners, r)
	}
	r, err := newExtismCalls(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close(ctx)
	runners = append(runners, r)
	for _, r := range runners {
		res, err := r.run(ctx, 300)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		if res.calls != 300 || res.wall <= 0 || res.cpu <= 0 {
			t.Fatalf("%s: %+v", r.name, res)
		}
	}
	if err := callRounds(ctx, runners, 300, 1); err != nil {
		t.Fatal(err)
	}
}
