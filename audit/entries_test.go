package audit

import (
	"context"
	"errors"
	"testing"
)

// TestVerifyEntries: a copy of the log's entries verifies against its
// signed checkpoint; an edited, a missing or a reordered entry, or another
// log's key, does not; entries past the checkpoint are not needed.
func TestVerifyEntries(t *testing.T) {
	l, _ := fill(t, 37)
	signed, err := l.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	fill := l.ForRun("r2")
	for i := range 5 {
		fill.Record(context.Background(), event(i))
	}
	all, err := l.Entries(context.Background(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := VerifyEntries(all, signed, l.VerifierKey()); err != nil || c.Size != 37 {
		t.Fatalf("the copy: %v, %+v", err, c)
	}
	if _, err := VerifyEntries(all[:37], signed, l.VerifierKey()); err != nil {
		t.Fatalf("the entries the checkpoint covers: %v", err)
	}
	if _, err := VerifyEntries(all[:36], signed, l.VerifierKey()); err == nil {
		t.Error("one entry short verified")
	}
	edited := append([]Entry(nil), all...)
	edited[20].Reason = "nothing to see"
	if _, err := VerifyEntries(edited, signed, l.VerifierKey()); !errors.Is(err, ErrTampered) {
		t.Errorf("an edited entry: %v", err)
	}
	swapped := append([]Entry(nil), all...)
	swapped[3], swapped[4] = swapped[4], swapped[3]
	if _, err := VerifyEntries(swapped, signed, l.VerifierKey()); !errors.Is(err, ErrTampered) {
		t.Errorf("two entries swapped: %v", err)
	}
	other, _ := open(t)
	if _, err := VerifyEntries(all, signed, other.VerifierKey()); err == nil {
		t.Error("another log's key verified the checkpoint")
	}
	part, err := l.Entries(context.Background(), Filter{From: 10, Before: 20})
	if err != nil || len(part) != 10 || part[0].Seq != 10 || part[9].Seq != 19 {
		t.Errorf("From/Before: %d entries, %v", len(part), err)
	}
}
