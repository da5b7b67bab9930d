package runstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

func sampleRecord(id string, started time.Time) Record {
	pii := kindapi.Label{}
	_ = json.Unmarshal([]byte(`{"conf":["pii:alice"]}`), &pii)
	return Record{
		Version: RecordVersion,
		Run: Run{ID: id, Manifest: "/m/trip.hcl", Task: "trip", Module: "/m/guest", Digest: "sha256:00",
			Principal: "alice", Engine: "wazero", Started: started.UTC(), Ended: started.Add(time.Second).UTC(),
			Exit: 1, State: "failed", Error: "guest trapped"},
		Graph: kernel.Graph{
			Tasks: []kernel.GraphTask{
				{ID: "t1", Principal: "alice", Module: "sha256:00", State: kernel.TaskFailed, Label: pii, Denials: 2, Error: "boom"},
				{ID: "t2", Parent: "t1", Principal: "alice", Module: "sha256:01", State: kernel.TaskDone, Clearance: &pii},
			},
			Caps: []kernel.GraphCap{
				{ID: "c1", Kind: "net", Name: "web", Holder: "t1", Scope: json.RawMessage(`{"origin":"https://a.example"}`),
					Audited: true, When: []string{"args.n < 3"}, Rate: "10/s"},
				{ID: "c2", Kind: "net", Holder: "t2", Parent: "c1", Scope: json.RawMessage(`{"origin":"https://a.example","paths":["/x"]}`),
					Revoked: true, ApproveWhen: []string{"true"}, View: kernel.CapView{Passed: true}},
				{ID: "c3", Kind: "pay", Holder: "t1", Scope: json.RawMessage(`null`), Dropped: true,
					View: kernel.CapView{Fields: []kindapi.Detail{{Name: "payees", Value: "airline.example"}}, MaxUses: 3, Uses: 1,
						Budget: "100.00 USD", Spent: "12.00 USD", Passed: true}},
			},
		},
		Denials: []Denial{{Time: started.UTC(), Task: "t1", Principal: "alice", Cap: "c1", Kind: "net", Op: "call:fetch",
			Errno: abi.EFLOW.String(), Reason: "label pii:alice may not flow to net web", Label: pii}},
		Flows: []Flow{{Time: started.UTC(), Task: "t1", Cap: "c1", Kind: "net", Op: "call:fetch", Decision: "deny",
			Errno: abi.EFLOW.String(), Label: pii}},
		Approvals: []Approval{{Time: started.UTC(), Task: "t1", Cap: "c3", Kind: "pay", Op: "approve:charge",
			Summary: "charge 612.00 USD to airline.example", Digest: "sha256:ab", Answer: "yes", Channel: "web", By: "web page, client 127.0.0.1:5"}},
		Effects: []Effect{
			{Time: started.UTC(), Task: "t1", Cap: "c1", Kind: "net", Op: "call:fetch",
				Summary: `POST https://a.example/book {"listing_id":"L1","guest":[spliced 0]}`, Outcome: "200"},
			{Time: started.UTC(), Task: "t1", Cap: "c3", Kind: "pay", Op: "call:charge",
				Summary: "charge 612.00 USD to airline.example", Outcome: "may have happened: ETIMEDOUT pay: no answer", Errno: "ETIMEDOUT"},
		},
		EffectsDropped: 2,
	}
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Get(ctx, ""); !errors.Is(err, ErrNoRuns) {
		t.Fatalf("empty store: %v, want ErrNoRuns", err)
	}
	t0 := time.Date(2026, 11, 29, 15, 30, 0, 123456789, time.UTC)
	want := sampleRecord("20261129T153000Z-aaaaaa", t0)
	if err := s.Begin(ctx, want.Run); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Run.State != StateRunning || !got.Run.Ended.IsZero() || len(got.Tasks) != 0 {
		t.Errorf("a begun run: %+v", got.Run)
	}
	if err := s.Finish(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err = s.Get(ctx, want.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The JSON contract: what is stored reads back as the same document.
	wj, _ := json.Marshal(want)
	gj, _ := json.Marshal(got)
	if string(wj) != string(gj) {
		t.Errorf("round trip:\n got %s\nwant %s", gj, wj)
	}
	// Edges are queryable.
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM edges WHERE run = ? AND kind = 'derive' AND src = 'c1' AND dst = 'c2'`, want.Run.ID).Scan(&n); err != nil || n != 1 {
		t.Errorf("derive edge: %d, %v", n, err)
	}
	if err := s.db.QueryRow(`SELECT count(*) FROM edges WHERE run = ? AND kind = 'pass' AND src = 't1' AND dst = 'c2'`, want.Run.ID).Scan(&n); err != nil || n != 1 {
		t.Errorf("pass edges t1 -> c2: %d, %v", n, err)
	}
	if err := s.db.QueryRow(`SELECT count(*) FROM edges WHERE run = ? AND kind = 'spawn'`, want.Run.ID).Scan(&n); err != nil || n != 1 {
		t.Errorf("spawn edges: %d, %v", n, err)
	}
	if _, err := s.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown run: %v", err)
	}
	for _, bad := range []string{"../x", "a/b", strings.Repeat("a", 200)} {
		if _, err := s.Get(ctx, bad); err == nil || !strings.Contains(err.Error(), "not a run id") {
			t.Errorf("Get(%q): %v", bad, err)
		}
	}
}

func TestListNewestFirst(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Date(2026, 11, 29, 15, 0, 0, 0, time.UTC)
	for i, id := range []string{"r2", "r1", "r3"} {
		rec := sampleRecord(id, t0.Add(time.Duration([]int{2, 1, 3}[i])*time.Minute))
		if err := s.Finish(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range list {
		ids = append(ids, r.ID)
		if r.Tasks != 2 || r.Caps != 3 || r.Denials != 2 {
			t.Errorf("%s: tasks %d caps %d denials %d", r.ID, r.Tasks, r.Caps, r.Denials)
		}
	}
	if !reflect.DeepEqual(ids, []string{"r3", "r2", "r1"}) {
		t.Errorf("order: %v", ids)
	}
	if last, err := s.Last(ctx); err != nil || last != "r3" {
		t.Errorf("last: %q, %v", last, err)
	}
}

func TestDenialsBounded(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec := sampleRecord("flood", time.Now())
	d := rec.Denials[0]
	rec.Denials = nil
	for range MaxDenials + 7 {
		rec.Denials = append(rec.Denials, d)
	}
	if err := s.Finish(ctx, rec); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "flood")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Denials) != MaxDenials || got.DenialsDropped != 7 {
		t.Errorf("kept %d denials, dropped %d", len(got.Denials), got.DenialsDropped)
	}
}

// TestCorruptAndForeign: a file that is not a run store, another program's
// database, a newer schema and a corrupted row are each a clear error
// naming the file; none is reset.
func TestCorruptAndForeign(t *testing.T) {
	ctx := context.Background()
	junkDir := t.TempDir()
	junk := filepath.Join(junkDir, FileName)
	content := []byte(strings.Repeat("garbage ", 1000))
	if err := os.WriteFile(junk, content, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(junkDir); err == nil || !strings.Contains(err.Error(), "not a Mandate run store") || !strings.Contains(err.Error(), junk) {
		t.Errorf("junk file: %v", err)
	}
	if b, _ := os.ReadFile(junk); string(b) != string(content) {
		t.Error("the junk file was changed")
	}

	foreignDir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(foreignDir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	db.Exec("CREATE TABLE other (x)")
	db.Close()
	if _, err := Open(foreignDir); err == nil || !strings.Contains(err.Error(), "other tables") {
		t.Errorf("foreign database: %v", err)
	}

	newerDir := t.TempDir()
	s, err := Open(newerDir)
	if err != nil {
		t.Fatal(err)
	}
	s.db.Exec("PRAGMA user_version = 99")
	s.Close()
	if _, err := Open(newerDir); err == nil || !strings.Contains(err.Error(), "newer Mandate") {
		t.Errorf("newer schema: %v", err)
	}

	rowDir := t.TempDir()
	s, err = Open(rowDir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Finish(ctx, sampleRecord("r1", time.Now())); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, sql, want string }{
		{"label", `UPDATE tasks SET label = '{not json' WHERE id = 't1'`, "task t1: label"},
		{"scope", `UPDATE caps SET scope = 'nope' WHERE id = 'c1'`, "cap c1: the scope is not JSON"},
		{"time", `UPDATE runs SET started = 'yesterday'`, "start time"},
	} {
		if _, err := s.db.Exec(tc.sql); err != nil {
			t.Fatal(err)
		}
		_, err := s.Get(ctx, "r1")
		if err == nil || !strings.Contains(err.Error(), "run r1 is corrupted") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.name, err)
		}
		if err := s.Finish(ctx, sampleRecord("r1", time.Now())); err != nil { // repair for the next case
			t.Fatal(err)
		}
	}
}

// TestLegacyImport: JSON records of the earlier format are imported on
// Open and renamed; a broken one stays and is reported.
func TestLegacyImport(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	if err := os.MkdirAll(runs, 0o700); err != nil {
		t.Fatal(err)
	}
	rec := sampleRecord("20261101T000000Z-abcdef", time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	rec.Denials, rec.Flows = nil, nil
	b, _ := json.Marshal(rec)
	if err := os.WriteFile(filepath.Join(runs, rec.Run.ID+".json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(runs, "broken.json"), []byte(`{"version":1,`), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !reflect.DeepEqual(s.Imported, []string{rec.Run.ID}) || len(s.ImportErrors) != 1 ||
		!strings.Contains(s.ImportErrors[0].Error(), "broken.json") {
		t.Fatalf("imported %v, errors %v", s.Imported, s.ImportErrors)
	}
	got, err := s.Get(ctx, rec.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Run.Principal != "alice" || len(got.Caps) != 3 || !got.Caps[1].Revoked {
		t.Errorf("imported record: %+v", got)
	}
	if _, err := os.Stat(filepath.Join(runs, rec.Run.ID+".json.imported")); err != nil {
		t.Errorf("the imported file was not renamed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(runs, "broken.json")); err != nil {
		t.Errorf("the broken file was touched: %v", err)
	}
}

// TestConcurrentGoroutines: runs recorded from many goroutines at once.
func TestConcurrentGoroutines(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := sampleRecord(fmt.Sprintf("g%02d", i), time.Now())
			if err := s.Begin(ctx, rec.Run); err != nil {
				errs <- err
				return
			}
			errs <- s.Finish(ctx, rec)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if list, err := s.List(ctx); err != nil || len(list) != n {
		t.Errorf("%d runs, %v", len(list), err)
	}
}

// TestConcurrentProcesses: several processes record runs into one store at
// once (this test binary re-executed as writers).
func TestConcurrentProcesses(t *testing.T) {
	if dir := os.Getenv("RUNSTORE_TEST_WRITER"); dir != "" {
		writer(t, dir)
		return
	}
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	const procs, each = 4, 10
	var cmds []*exec.Cmd
	for i := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestConcurrentProcesses$")
		cmd.Env = append(os.Environ(), "RUNSTORE_TEST_WRITER="+dir, "RUNSTORE_TEST_PREFIX=p"+strconv.Itoa(i), "RUNSTORE_TEST_N="+strconv.Itoa(each))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	list, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != procs*each {
		t.Fatalf("%d runs recorded, want %d", len(list), procs*each)
	}
	for _, r := range list {
		rec, err := s.Get(context.Background(), r.ID)
		if err != nil || len(rec.Tasks) != 2 || len(rec.Caps) != 3 || rec.Run.State != "failed" {
			t.Errorf("%s: %v", r.ID, err)
		}
	}
}

func writer(t *testing.T, dir string) {
	ctx := context.Background()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n, _ := strconv.Atoi(os.Getenv("RUNSTORE_TEST_N"))
	for i := range n {
		rec := sampleRecord(fmt.Sprintf("%s-%02d", os.Getenv("RUNSTORE_TEST_PREFIX"), i), time.Now())
		if err := s.Begin(ctx, rec.Run); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUpgradeFromVersion1: a run store written before capabilities had a
// view (schema 1) opens, is upgraded in place, keeps its runs (their caps
// with an empty view) and records new ones with it.
func TestUpgradeFromVersion1(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	old := sampleRecord("20261129T153000Z-aaaaaa", time.Date(2026, 11, 29, 15, 30, 0, 0, time.UTC))
	if err := s.Begin(ctx, old.Run); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, old); err != nil {
		t.Fatal(err)
	}
	// Make it a version 1 file: no view column, no pass edges, no
	// outputs, no approvals.
	if _, err := s.db.ExecContext(ctx, `ALTER TABLE caps DROP COLUMN view; DROP TABLE outputs; DROP TABLE approvals;
		DROP TABLE effects; ALTER TABLE runs DROP COLUMN effects_dropped`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM edges WHERE kind = 'pass'; CREATE TABLE e1 (run TEXT NOT NULL REFERENCES runs(id),
		kind TEXT NOT NULL CHECK (kind IN ('derive', 'spawn', 'holds')), src TEXT NOT NULL, dst TEXT NOT NULL);
		INSERT INTO e1 SELECT * FROM edges; DROP TABLE edges; ALTER TABLE e1 RENAME TO edges; CREATE INDEX edges_run ON edges (run, kind, src)`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `PRAGMA user_version = 1`); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = Open(dir)
	if err != nil {
		t.Fatalf("opening a version 1 store: %v", err)
	}
	defer s.Close()
	got, err := s.Get(ctx, old.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Caps) != 3 || !reflect.DeepEqual(got.Caps[2].View, kernel.CapView{}) || got.Caps[0].Rate != "10/s" || len(got.Tasks) != 2 {
		t.Fatalf("the old run after the upgrade: %+v", got.Caps)
	}
	rec := sampleRecord("20261129T160000Z-bbbbbb", time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC))
	if err := s.Begin(ctx, rec.Run); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, rec); err != nil {
		t.Fatal(err)
	}
	got, err = s.Get(ctx, rec.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Caps[2].View, rec.Caps[2].View) {
		t.Fatalf("view %+v, want %+v", got.Caps[2].View, rec.Caps[2].View)
	}
	if !reflect.DeepEqual(got.Approvals, rec.Approvals) {
		t.Fatalf("approvals %+v, want %+v", got.Approvals, rec.Approvals)
	}
	if !reflect.DeepEqual(got.Effects, rec.Effects) || got.EffectsDropped != rec.EffectsDropped {
		t.Fatalf("effects %+v (%d dropped), want %+v", got.Effects, got.EffectsDropped, rec.Effects)
	}
}

// TestUpgradeFromVersion4: a run store written before runs recorded their
// effects (schema 4) opens, is upgraded in place, keeps its runs (with no
// effects) and records the effects of new ones.
func TestUpgradeFromVersion4(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	old := sampleRecord("20261129T153000Z-aaaaaa", time.Date(2026, 11, 29, 15, 30, 0, 0, time.UTC))
	old.Effects, old.EffectsDropped = nil, 0
	if err := s.Begin(ctx, old.Run); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, `DROP TABLE effects; ALTER TABLE runs DROP COLUMN effects_dropped; ALTER TABLE outputs DROP COLUMN withheld; PRAGMA user_version = 4`); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// Read-only first: an older file is not upgraded by a reader.
	if ro, err := OpenReadOnly(dir); err == nil {
		ro.Close()
		t.Fatal("a read-only open of a version 4 store succeeded: it cannot read effects")
	}
	s, err = Open(dir)
	if err != nil {
		t.Fatalf("opening a version 4 store: %v", err)
	}
	defer s.Close()
	var v int
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil || v != schemaVersion {
		t.Fatalf("user_version %d, %v; want %d", v, err, schemaVersion)
	}
	got, err := s.Get(ctx, old.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Effects) != 0 || got.EffectsDropped != 0 || !reflect.DeepEqual(got.Approvals, old.Approvals) || len(got.Tasks) != 2 {
		t.Fatalf("the old run after the upgrade: effects %+v, approvals %+v", got.Effects, got.Approvals)
	}
	rec := sampleRecord("20261129T160000Z-bbbbbb", time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC))
	if err := s.Begin(ctx, rec.Run); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, rec); err != nil {
		t.Fatal(err)
	}
	got, err = s.Get(ctx, rec.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Effects, rec.Effects) || got.EffectsDropped != 2 {
		t.Fatalf("effects %+v (%d dropped), want %+v", got.Effects, got.EffectsDropped, rec.Effects)
	}
}

// TestCrashedRunsAreReported: a run recorded as running shows as running
// while its process holds its lock, and as crashed once the process has
// ended without recording the end (its lock released by the system).
func TestCrashedRunsAreReported(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s1, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	rec := sampleRecord("20261129T153000Z-aaaaaa", time.Date(2026, 11, 29, 15, 30, 0, 0, time.UTC))
	if err := s1.Begin(ctx, rec.Run); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(dir) // another reader, as "mandate runs" in another process
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	state := func() string {
		t.Helper()
		got, err := s2.Get(ctx, rec.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		runs, err := s2.List(ctx)
		if err != nil || len(runs) != 1 || runs[0].State != got.Run.State {
			t.Fatalf("List %v (%v) disagrees with Get %q", runs, err, got.Run.State)
		}
		return got.Run.State
	}
	if got := state(); got != StateRunning {
		t.Fatalf("a run whose process holds its lock: %q, want running", got)
	}
	// The process dies: the system drops its lock, the file stays.
	s1.live.mu.Lock()
	s1.live.files[rec.Run.ID].Close()
	delete(s1.live.files, rec.Run.ID)
	s1.live.mu.Unlock()
	if got := state(); got != StateCrashed {
		t.Fatalf("a run whose process died: %q, want crashed", got)
	}
	// A run that finished is what it was, and leaves no lock behind.
	rec2 := sampleRecord("20261129T160000Z-bbbbbb", time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC))
	if err := s1.Begin(ctx, rec2.Run); err != nil {
		t.Fatal(err)
	}
	if err := s1.Finish(ctx, rec2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s1.lockPath(rec2.Run.ID)); !os.IsNotExist(err) {
		t.Errorf("the lock of a finished run is left: %v", err)
	}
}

// TestForgottenTasksStay: a snapshot taken after the kernel forgot an
// ended task (kernel.Forget) lacks it and its capabilities; their rows stay
// as last written, in their place, with their edges and outputs, and a new
// task goes after them.
func TestForgottenTasksStay(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	full := sampleRecord("20261201T150000Z-aaaaaa", time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC))
	full.Outputs = []Output{{Task: "t2", Stream: StreamResult, Data: []byte("child result")}}
	if err := s.Begin(ctx, full.Run); err != nil {
		t.Fatal(err)
	}
	if err := s.Snapshot(ctx, full); err != nil {
		t.Fatal(err)
	}
	// t2 and the capability it held (c2) are forgotten; t3 and c4 are new;
	// t1's state changed.
	later := full
	later.Graph = kernel.Graph{
		Tasks: []kernel.GraphTask{full.Tasks[0], {ID: "t3", Parent: "t1", Principal: "alice", Module: "sha256:01", State: kernel.TaskRunning}},
		Caps:  []kernel.GraphCap{full.Caps[0], full.Caps[2], {ID: "c4", Kind: "net", Holder: "t3", Parent: "c1", Scope: json.RawMessage(`{}`)}},
	}
	later.Tasks[0].Denials = 5
	later.Outputs = nil
	if err := s.Finish(ctx, later); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, full.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var tasks, caps []string
	for _, x := range got.Tasks {
		tasks = append(tasks, x.ID)
	}
	for _, x := range got.Caps {
		caps = append(caps, x.ID)
	}
	if strings.Join(tasks, ",") != "t1,t2,t3" || strings.Join(caps, ",") != "c1,c2,c3,c4" {
		t.Fatalf("tasks %v, caps %v; want t1,t2,t3 and c1..c4 in order", tasks, caps)
	}
	if got.Tasks[0].Denials != 5 || got.Tasks[1].State != kernel.TaskDone || !got.Caps[1].Revoked {
		t.Errorf("rows not as last written: %+v", got.Graph)
	}
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM edges WHERE run = ?`, full.Run.ID).Scan(&n); err != nil || n != 9 {
		// spawn t1->t2, t1->t3; derive c1->c2, c1->c4; holds x4; pass t1->c2
		t.Errorf("edges: %d, %v; want 9, none twice", n, err)
	}
	if out, err := s.Outputs(ctx, full.Run.ID, "t2"); err != nil || len(out) != 1 {
		t.Errorf("the forgotten task's output: %+v, %v", out, err)
	}
}
