package kernel

import (
	"testing"
	"time"
)

func at(t time.Time) func() time.Time { return func() time.Time { return t } }

// TestBucketRefill checks the token bucket against a fake clock: a burst of
// N, then one call per Per/N, and a parent's refusal spends nothing.
func TestBucketRefill(t *testing.T) {
	t0 := time.Unix(1000, 0)
	root := &Cap{id: "c1", rate: newBucket(Rate{N: 2, Per: time.Second}, t0)}
	child := &Cap{id: "c2", parent: root, rate: newBucket(Rate{N: 10, Per: time.Second}, t0)}
	for i, want := range []bool{true, true, false} {
		if _, err := takeRate(child, at(t0)); (err == nil) != want {
			t.Fatalf("call %d at t0: %v, want ok=%v", i, err, want)
		}
	}
	if child.rate.tokens != 8 {
		t.Errorf("the child's bucket was charged for a call its parent refused: %v tokens, want 8", child.rate.tokens)
	}
	if _, err := takeRate(child, at(t0.Add(400*time.Millisecond))); err == nil {
		t.Error("a call 400ms later passed; the parent earns one call per 500ms")
	}
	if _, err := takeRate(child, at(t0.Add(500*time.Millisecond))); err != nil {
		t.Errorf("a call 500ms later: %v", err)
	}
	// A long idle time refills to the burst, never beyond.
	later := t0.Add(time.Hour)
	for i, want := range []bool{true, true, false} {
		if _, err := takeRate(root, at(later)); (err == nil) != want {
			t.Fatalf("call %d an hour later: %v, want ok=%v", i, err, want)
		}
	}
	// A clock that goes backwards earns nothing.
	if _, err := takeRate(root, at(t0)); err == nil {
		t.Error("a call with an earlier clock passed")
	}
}
