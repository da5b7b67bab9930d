package fleet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mandatevm/mandate/runstore"
)

// TestRecordCopy: a node's copy of a run's record reads back whole,
// outputs included; a run it copied nothing of, or a name that cannot be
// a subject's token, is ErrNoRecord.
func TestRecordCopy(t *testing.T) {
	_, f := startFleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := runstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const id = "20260301T120000Z-abcdef"
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rec := runstore.Record{Version: runstore.RecordVersion,
		Run:     runstore.Run{ID: id, Manifest: "m.hcl", Task: "t", Principal: "alice", Started: start, Ended: start.Add(time.Second), State: "done"},
		Outputs: []runstore.Output{{Task: "t1", Stream: runstore.StreamResult, Data: []byte("the answer")}}}
	if err := st.Finish(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := copyRecord(ctx, f, st, "node-a", id); err != nil {
		t.Fatal(err)
	}
	got, err := f.Record(ctx, "node-a", id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Run.ID != id || got.Run.Principal != "alice" || len(got.Outputs) != 1 || string(got.Outputs[0].Data) != "the answer" {
		t.Errorf("the copy: %+v", got)
	}
	for _, tc := range []struct{ node, run string }{
		{"node-b", id},                        // another node's
		{"node-a", "20260301T120000Z-000000"}, // another run
		{"node.a", id},                        // not a token
		{"node-a", "a.b"},                     // not a token
		{"*", id},
	} {
		if _, err := f.Record(ctx, tc.node, tc.run); !errors.Is(err, ErrNoRecord) {
			t.Errorf("Record(%q, %q): %v, want ErrNoRecord", tc.node, tc.run, err)
		}
	}
}
