package runstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/testfs"
)

// TestOutputs: what each task left is stored with the run, read back in
// task order (result, stdout, stderr), one task's alone, and a rewrite of
// the run replaces them.
func TestOutputs(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := sampleRecord("20261201T120000Z-aaaaaa", time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	child, root := rec.Tasks[1].ID, rec.Tasks[0].ID
	rec.Outputs = []Output{
		{Task: child, Stream: StreamStderr, Data: []byte("child err\x1b[2J"), Size: 13},
		{Task: root, Stream: StreamStdout, Data: []byte("kept"), Truncated: true, Dropped: 7, Size: 11},
		{Task: root, Stream: StreamResult, Data: []byte{0, 1, 2}, Size: 3},
		{Task: child, Stream: StreamResult, Data: []byte{}},
	}
	if err := s.Finish(ctx, rec); err != nil {
		t.Fatal(err)
	}
	got, err := s.Outputs(ctx, rec.Run.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []Output{rec.Outputs[2], rec.Outputs[1], rec.Outputs[3], rec.Outputs[0]}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("outputs\n got %+v\nwant %+v", got, want)
	}
	if got, _ := s.Outputs(ctx, "", child); len(got) != 2 || got[0].Task != child {
		t.Errorf("the child's outputs of the last run: %+v", got)
	}
	rec.Outputs = rec.Outputs[:1]
	if err := s.Finish(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Outputs(ctx, rec.Run.ID, ""); len(got) != 1 {
		t.Errorf("after a rewrite: %+v", got)
	}
	if _, err := s.Outputs(ctx, "20261201T120000Z-ffffff", ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("an unknown run: %v", err)
	}
}

// TestOpenReadOnly: a state directory that cannot be written (root
// included) is read whole: the list, a record, its outputs, a crashed
// run's state; writing is refused with a clear error, and nothing is
// created in a directory with no store.
func TestOpenReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenReadOnly(empty); !errors.Is(err, ErrNoRuns) {
		t.Errorf("a directory with no store: %v", err)
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Errorf("reading created %v", ents)
	}
	state := filepath.Join(dir, "state")
	s, err := Open(state)
	if err != nil {
		t.Fatal(err)
	}
	rec := sampleRecord("20261201T120000Z-aaaaaa", time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	rec.Outputs = []Output{{Task: rec.Tasks[0].ID, Stream: StreamResult, Data: []byte("r")}}
	if err := s.Finish(ctx, rec); err != nil {
		t.Fatal(err)
	}
	crashed := sampleRecord("20261201T130000Z-bbbbbb", time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC))
	if _, err := s.db.ExecContext(ctx, `INSERT INTO runs (id, manifest, task, module, digest, principal, engine, started, state)
		VALUES (?, '', '', '', '', '', '', ?, 'running')`, crashed.Run.ID, fmtTime(crashed.Run.Started)); err != nil {
		t.Fatal(err)
	}
	s.Close()

	testfs.ReadOnly(t, state)
	ro, err := OpenReadOnly(state)
	if err != nil {
		t.Fatalf("opening a read-only state directory: %v", err)
	}
	defer ro.Close()
	runs, err := ro.List(ctx)
	if err != nil || len(runs) != 2 || runs[0].State != StateCrashed {
		t.Fatalf("list: %+v, %v", runs, err)
	}
	got, err := ro.Get(ctx, rec.Run.ID)
	if err != nil || len(got.Caps) != len(rec.Caps) {
		t.Fatalf("get: %v", err)
	}
	if outs, err := ro.Outputs(ctx, rec.Run.ID, ""); err != nil || len(outs) != 1 || string(outs[0].Data) != "r" {
		t.Errorf("outputs: %+v, %v", outs, err)
	}
	if err := ro.Begin(ctx, crashed.Run); err == nil {
		t.Error("Begin on a read-only store succeeded")
	}
	if _, err := Open(state); err == nil {
		t.Error("opening a read-only directory for writing succeeded")
	} else {
		t.Logf("opening it for writing: %v", err)
	}
}
