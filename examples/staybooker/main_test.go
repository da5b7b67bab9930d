package main

import (
	"bytes"
	"context"
	"strings"
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

// TestStayBookerAnswerBesideEffects: a model whose answer claims the
// Skyline Loft (L2) while its tool booked L1. The run's report says both:
// the answer as the model wrote it, and beside it, from the audit log, the
// POST the booking API received, of L1, and its outcome.
func TestStayBookerAnswerBesideEffects(t *testing.T) {
	t.Setenv("MANDATE_ENGINE", testengine.Name())
	planner, reader := modelsAnswering(false, "I booked the Skyline Loft (L2) for 390 EUR.")
	defer planner.Close()
	defer reader.Close()
	s := startSites()
	defer s.close()
	var out, errs bytes.Buffer
	rep, err := run(context.Background(), &out, &errs, t.TempDir(), s, planner.URL(), "planner", reader.URL(), "reader")
	if err != nil {
		t.Fatalf("%v\nstderr:\n%s", err, &errs)
	}
	if rep.State != "done" || !strings.Contains(rep.Result, "answer: I booked the Skyline Loft (L2)") {
		t.Fatalf("the run ended %s with %q", rep.State, rep.Result)
	}
	if err := checkBooked(rep, s.booking.URL); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bookings) != 1 || !strings.Contains(s.bookings[0], `"listing_id":"L1"`) {
		t.Fatalf("the booking API received %q", s.bookings)
	}
	var shown bytes.Buffer
	printEffects(&shown, rep)
	t.Logf("%s%s", rep.Result, &shown)
}
