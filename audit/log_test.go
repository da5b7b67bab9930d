package audit

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel"
)

func open(t testing.TB) (*Log, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.db")
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, path
}

func event(i int) kernel.AuditEvent {
	d := kernel.Allow
	if i%3 == 0 {
		d = kernel.Deny
	}
	return kernel.AuditEvent{
		Time: time.Now(), Task: fmt.Sprintf("t%d", i%4), Principal: "alice", Module: "m",
		Cap: fmt.Sprintf("c%d", i), Kind: "data", Op: "call:get", Decision: d, Errno: abi.Errno(0),
		Reason: fmt.Sprintf("reason %d", i),
	}
}

// fill appends n entries to run "r1" and returns the log path.
func fill(t *testing.T, n int) (*Log, string) {
	t.Helper()
	l, path := open(t)
	a := l.ForRun("r1")
	for i := range n {
		if err := a.Record(context.Background(), event(i)); err != nil {
			t.Fatal(err)
		}
	}
	return l, path
}

func raw(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func exec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func wantBad(t *testing.T, l *Log, entry int64, substr string) {
	t.Helper()
	rep, err := l.Verify(context.Background())
	var te *TamperError
	if !errors.As(err, &te) || !errors.Is(err, ErrTampered) {
		t.Fatalf("Verify = %v, want a TamperError", err)
	}
	if te.Entry != entry || rep.FirstBad != entry || rep.OK() {
		t.Fatalf("Verify: first bad %d (report %d), want %d: %v", te.Entry, rep.FirstBad, entry, err)
	}
	if !strings.Contains(err.Error(), substr) {
		t.Fatalf("Verify: %v, want it to mention %q", err, substr)
	}
	t.Log(err)
}

func TestConcurrentRecordVerify(t *testing.T) {
	l, _ := open(t)
	const G, N = 16, 25
	var wg sync.WaitGroup
	for g := range G {
		wg.Go(func() {
			a := l.ForRun(fmt.Sprintf("run%d", g%2))
			for i := range N {
				if err := a.Record(context.Background(), event(g*N+i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
		if g == G/2 {
			wg.Go(func() {
				if _, err := l.Checkpoint(); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	if _, err := l.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	rep, err := l.Verify(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Entries != G*N || rep.TreeSize != G*N || rep.Latest == nil || rep.Latest.Size != G*N || rep.Checkpoints != 2 {
		t.Fatalf("report %+v", rep)
	}
	all, err := l.Entries(context.Background(), Filter{})
	if err != nil || len(all) != G*N {
		t.Fatalf("Entries: %d, %v", len(all), err)
	}
	for i, e := range all {
		if e.Seq != int64(i) {
			t.Fatalf("entry %d has seq %d", i, e.Seq)
		}
	}
}

// TestRecordAllTogether: batches recorded with RecordAll among concurrent
// single Records are committed whole, in order and next to each other, and
// the log verifies.
func TestRecordAllTogether(t *testing.T) {
	l, _ := open(t)
	const G, N, B = 4, 20, 3
	var wg sync.WaitGroup
	for g := range G {
		wg.Go(func() {
			a := l.ForRun(fmt.Sprintf("run%d", g))
			for i := range N {
				var err error
				if g%2 == 0 {
					evs := make([]kernel.AuditEvent, B)
					for j := range evs {
						evs[j] = event(j)
						evs[j].Task = fmt.Sprintf("g%d-%d", g, i)
					}
					err = a.(kernel.BatchAuditor).RecordAll(context.Background(), evs)
				} else {
					ev := event(i)
					ev.Task = fmt.Sprintf("g%d-%d", g, i)
					err = a.Record(context.Background(), ev)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	rep, err := l.Verify(context.Background())
	if err != nil || !rep.OK() || rep.Entries != G/2*N*(B+1) {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
	all, err := l.Entries(context.Background(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	batches := 0
	for i := 0; i < len(all); i++ {
		if g := all[i].Run; g != "run0" && g != "run2" {
			continue
		}
		// The first of a batch: the next B-1 are the rest of it, in order.
		batches++
		for j := range B {
			if i+j >= len(all) {
				t.Fatalf("batch %s cut short at the end of the log", all[i].Task)
			}
			e := all[i+j]
			want := event(j)
			if e.Task != all[i].Task || e.Cap != want.Cap || e.Reason != want.Reason {
				t.Fatalf("entry %d: %+v, want entry %d of batch %s", i+j, e, j, all[i].Task)
			}
		}
		i += B - 1
	}
	if batches != G/2*N {
		t.Fatalf("%d batches, want %d", batches, G/2*N)
	}
}

func TestEntriesFilter(t *testing.T) {
	l, _ := fill(t, 12)
	if err := l.Record(context.Background(), event(100)); err != nil { // run ""
		t.Fatal(err)
	}
	ctx := context.Background()
	got, _ := l.Entries(ctx, Filter{Run: "r1"})
	if len(got) != 12 {
		t.Fatalf("run r1: %d entries", len(got))
	}
	got, _ = l.Entries(ctx, Filter{Run: "r1", Task: "t1"})
	if len(got) != 3 || got[0].Task != "t1" || got[0].Reason != "reason 1" || got[0].Errno != abi.Errno(0).String() {
		t.Fatalf("task t1: %+v", got)
	}
	got, _ = l.Entries(ctx, Filter{Denied: true})
	if len(got) != 4 { // 0, 3, 6, 9 (100 is allowed)
		t.Fatalf("denied: %d", len(got))
	}
	for _, e := range got {
		if e.Decision != string(kernel.Deny) {
			t.Fatalf("denied filter returned %+v", e)
		}
	}
}

func TestTamperChangeReason(t *testing.T) {
	l, path := fill(t, 10)
	exec(t, raw(t, path), "UPDATE entries SET reason = 'nothing to see' WHERE idx = 6")
	wantBad(t, l, 6, "entry 6")
}

func TestTamperDelete(t *testing.T) {
	l, path := fill(t, 10)
	exec(t, raw(t, path), "DELETE FROM entries WHERE idx = 4")
	wantBad(t, l, 4, "missing")
}

func TestTamperDeleteLast(t *testing.T) {
	l, path := fill(t, 10)
	exec(t, raw(t, path), "DELETE FROM entries WHERE idx = 9")
	wantBad(t, l, 9, "missing")
}

func TestTamperSwap(t *testing.T) {
	l, path := fill(t, 10)
	db := raw(t, path)
	// Swap the contents of rows 3 and 7, keeping their seq.
	exec(t, db, "UPDATE entries SET idx = -1 WHERE idx = 3")
	exec(t, db, "UPDATE entries SET idx = 3 WHERE idx = 7")
	exec(t, db, "UPDATE entries SET idx = 7 WHERE idx = -1")
	wantBad(t, l, 3, "entry 3")
}

func TestTamperInsert(t *testing.T) {
	l, path := fill(t, 10)
	exec(t, raw(t, path), `INSERT INTO entries (idx, time, run, task, principal, module, cap, ancestry, kind, op, args, decision, errno, reason, label)
		SELECT 10, time, run, task, principal, module, cap, ancestry, kind, op, args, 'allow', errno, 'forged', label FROM entries WHERE idx = 0`)
	wantBad(t, l, 10, "inserted")
}

func TestTamperInsertMiddle(t *testing.T) {
	l, path := fill(t, 10)
	db := raw(t, path)
	// Shift entries 5.. up by one and forge an entry 5.
	exec(t, db, "UPDATE entries SET idx = idx + 100 WHERE idx >= 5")
	exec(t, db, "UPDATE entries SET idx = idx - 99 WHERE idx >= 100")
	exec(t, db, `INSERT INTO entries (idx, time, run, task, principal, module, cap, ancestry, kind, op, args, decision, errno, reason, label)
		SELECT 5, time, run, task, principal, module, cap, ancestry, kind, op, args, 'allow', errno, 'forged', label FROM entries WHERE idx = 0`)
	wantBad(t, l, 5, "entry 5")
}

// TestTamperRehash rewrites an entry and recomputes every stored hash to
// match: only the signed checkpoint catches it.
func TestTamperRehash(t *testing.T) {
	l, path := fill(t, 8)
	if _, err := l.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if err := l.Record(context.Background(), event(8+i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Verify(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Forge entry 11 through a second log sharing nothing but the rows.
	db := raw(t, path)
	exec(t, db, "UPDATE entries SET reason = 'forged' WHERE idx = 11")
	exec(t, db, "DELETE FROM hashes")
	exec(t, db, "UPDATE tree SET size = 0")
	rows, err := l.Entries(context.Background(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	exec(t, db, "DELETE FROM entries")
	for _, e := range rows {
		exec(t, db, `INSERT INTO entries (idx, time, run, task, principal, module, cap, ancestry, kind, op, args, decision, errno, reason, label) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
			e.Seq, e.Time, e.Run, e.Task, e.Principal, e.Module, e.Cap, e.Ancestry, e.Kind, e.Op, e.Args, e.Decision, e.Errno, e.Reason, e.Label)
	}
	// Recompute the hashes table with the library's own append path on a
	// scratch log, then copy it over.
	scratch, spath := open(t)
	for _, e := range rows {
		if err := scratch.append([]*pending{{es: []Entry{e}}}); err != nil {
			t.Fatal(err)
		}
	}
	scratch.Close()
	exec(t, db, "ATTACH DATABASE ? AS s", spath)
	exec(t, db, "INSERT INTO hashes SELECT * FROM s.hashes")
	exec(t, db, "UPDATE tree SET size = (SELECT size FROM s.tree)")
	wantBad(t, l, 8, "checkpoint 2")
}

func TestTamperCheckpoint(t *testing.T) {
	l, path := fill(t, 5)
	signed, err := l.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	if c, err := OpenCheckpoint(signed, l.VerifierKey()); err != nil || c.Size != 5 {
		t.Fatalf("OpenCheckpoint = %+v, %v", c, err)
	}
	for i := range signed {
		bad := append([]byte(nil), signed...)
		bad[i] ^= 1
		if _, err := OpenCheckpoint(bad, l.VerifierKey()); err == nil {
			t.Fatalf("checkpoint with byte %d (%q of %d) changed verifies", i, signed[i], len(signed))
		}
	}
	bad := append([]byte(nil), signed...)
	bad[len("mandate audit log v1\n")] ^= 1 // the size
	if _, err := l.VerifyCheckpoint(context.Background(), bad); !errors.Is(err, ErrTampered) {
		t.Fatalf("VerifyCheckpoint(changed) = %v", err)
	}
	if _, err := l.VerifyCheckpoint(context.Background(), signed); err != nil {
		t.Fatal(err)
	}
	exec(t, raw(t, path), "UPDATE checkpoints SET signed = ?", bad)
	wantBad(t, l, -1, "checkpoint 1")
}

func TestKeyMode(t *testing.T) {
	l, path := open(t)
	vkey := l.VerifierKey()
	l.Close()
	kf := filepath.Join(filepath.Dir(path), KeyFile)
	fi, err := os.Stat(kf)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v", fi.Mode(), err)
	}
	l2, err := Open(path) // the same key again
	if err != nil {
		t.Fatal(err)
	}
	if l2.VerifierKey() != vkey {
		t.Fatal("key changed on reopen")
	}
	l2.Close()
	if err := os.Chmod(kf, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(path)
	if err == nil || !strings.Contains(err.Error(), "group or others") {
		t.Fatalf("Open with a 0644 key = %v", err)
	}
	t.Log(err)
}

func TestCorrupted(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.db")
	if err := os.WriteFile(path, []byte(strings.Repeat("not a database ", 500)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path)
	if err == nil || !strings.Contains(err.Error(), "not a Mandate audit log") {
		t.Fatalf("Open(garbage) = %v", err)
	}
	t.Log(err)

	// A foreign SQLite database.
	other := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, db, "CREATE TABLE x (y)")
	db.Close()
	_, err = Open(other)
	if err == nil || !strings.Contains(err.Error(), "not a Mandate audit log") {
		t.Fatalf("Open(foreign) = %v", err)
	}
	t.Log(err)
}

func TestReopenAppend(t *testing.T) {
	l, path := fill(t, 3)
	l.Close()
	l2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if err := l2.ForRun("r2").Record(context.Background(), event(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := l2.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	rep, err := l2.Verify(context.Background())
	if err != nil || rep.Entries != 4 {
		t.Fatalf("%+v %v", rep, err)
	}
}

func BenchmarkRecord(b *testing.B) {
	l, _ := open(b)
	a := l.ForRun("bench")
	ev := event(1)
	b.ResetTimer()
	for b.Loop() {
		if err := a.Record(context.Background(), ev); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRecordParallel(b *testing.B) {
	l, _ := open(b)
	a := l.ForRun("bench")
	ev := event(1)
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := a.Record(context.Background(), ev); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func TestReceipt(t *testing.T) {
	l, _ := open(t)
	cp, err := l.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	signed, err := l.SignReceipt(Receipt{Run: "r1", Module: "sha256:00", Principal: "alice",
		Grants:     []ReceiptGrant{{Name: "web", Kind: "net", Scope: json.RawMessage(`{"origin":"https://a.example"}`)}},
		Checkpoint: string(cp)})
	if err != nil {
		t.Fatal(err)
	}
	r, err := OpenReceipt(signed, l.VerifierKey())
	if err != nil || r.Principal != "alice" || len(r.Grants) != 1 {
		t.Fatalf("OpenReceipt = %+v, %v", r, err)
	}
	for i := range signed {
		bad := append([]byte(nil), signed...)
		bad[i] ^= 1
		if _, err := OpenReceipt(bad, l.VerifierKey()); err == nil {
			t.Fatalf("a receipt with byte %d changed verified", i)
		}
	}
}

// TestKeyConcurrentCreate has several first users of a state directory
// create its key at once: every one must get the same, complete key, and
// no temporary file may be left behind. Creating the key file with O_EXCL
// and then writing it let a concurrent reader see it empty (a CI failure:
// "not a note signing key: malformed verifier id").
func TestKeyConcurrentCreate(t *testing.T) {
	for round := range 50 {
		dir := t.TempDir()
		path := filepath.Join(dir, KeyFile)
		const n = 8
		keys := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { _, _, keys[i], errs[i] = loadKey(path) })
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("round %d: loadKey %d: %v", round, i, errs[i])
			}
			if keys[i] != keys[0] {
				t.Fatalf("round %d: loadKey %d got another key", round, i)
			}
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 1 {
			t.Fatalf("round %d: directory holds %d files, want only the key", round, len(ents))
		}
	}
}
