package runstore

import (
	"context"
	"testing"
	"time"
)

// TestRootCaps: each run's capabilities derived from none of the run's
// (c1 and c3 of the sample; c2 derives from c1), with their views.
func TestRootCaps(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Date(2026, 11, 29, 15, 0, 0, 0, time.UTC)
	for _, id := range []string{"r1", "r2"} {
		if err := s.Finish(ctx, sampleRecord(id, t0)); err != nil {
			t.Fatal(err)
		}
	}
	roots, err := s.RootCaps(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"r1", "r2"} {
		got := roots[id]
		if len(got) != 2 || got[0].ID != "c1" || got[0].Kind != "net" || got[1].ID != "c3" || got[1].Kind != "pay" ||
			len(got[1].View.Fields) != 1 || got[1].View.Fields[0].Value != "airline.example" {
			t.Errorf("%s: got %+v, want c1 (net) and c3 (pay, its view)", id, got)
		}
	}
	if len(roots) != 2 {
		t.Errorf("runs: %d, want 2", len(roots))
	}
}
