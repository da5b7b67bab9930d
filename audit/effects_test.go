package audit

import (
	"context"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel"
)

// TestCanonicalWithoutEffect: an entry with no effect has the canonical
// bytes entries had before effects were recorded, so old logs verify
// byte for byte; one with an effect adds its two fields at the end.
func TestCanonicalWithoutEffect(t *testing.T) {
	e := Entry{Seq: 7, Time: "2026-11-29T15:30:00.123456789Z", Run: "r1", Task: "t1", Principal: "alice", Module: "sha256:00",
		Cap: "c2", Ancestry: "c1,c2", Kind: "net", Op: "call:fetch", Args: "ab", Decision: "outcome", Errno: "ESUCCESS",
		Reason: "", Label: "{}/{}"}
	const old = `{"seq":7,"time":"2026-11-29T15:30:00.123456789Z","run":"r1","task":"t1","principal":"alice","module":"sha256:00",` +
		`"cap":"c2","ancestry":"c1,c2","kind":"net","op":"call:fetch","args":"ab","decision":"outcome","errno":"ESUCCESS","reason":"","label":"{}/{}"}`
	if got := string(e.canonical()); got != old {
		t.Errorf("canonical:\n got %s\nwant %s", got, old)
	}
	e.Effect, e.EffectOutcome = `POST https://book.example/book {"listing_id":"L1","guest":[spliced 0]}`, "200"
	want := old[:len(old)-1] + `,"effect":"POST https://book.example/book {\"listing_id\":\"L1\",\"guest\":[spliced 0]}","effect_outcome":"200"}`
	if got := string(e.canonical()); got != want {
		t.Errorf("canonical with an effect:\n got %s\nwant %s", got, want)
	}
}

// TestEffectEntries: an outcome entry with an effect is stored, read back
// and verified; changing its effect is tampering.
func TestEffectEntries(t *testing.T) {
	ctx := context.Background()
	l, path := fill(t, 3)
	ev := kernel.AuditEvent{Task: "t1", Cap: "c1", Kind: "net", Op: "call:fetch", Decision: kernel.Outcome, Errno: abi.ESUCCESS,
		Effect: &kernel.EffectRecord{Summary: `POST http://127.0.0.1:1/book {"listing_id":"L1"}`, Outcome: "200"}}
	if err := l.ForRun("r1").Record(ctx, ev); err != nil {
		t.Fatal(err)
	}
	es, err := l.Entries(ctx, Filter{Run: "r1", From: 3})
	if err != nil || len(es) != 1 {
		t.Fatalf("entries %+v, %v", es, err)
	}
	if es[0].Effect != ev.Effect.Summary || es[0].EffectOutcome != "200" {
		t.Fatalf("read back %q -> %q", es[0].Effect, es[0].EffectOutcome)
	}
	if rep, err := l.Verify(ctx); err != nil || !rep.OK() {
		t.Fatalf("verify: %+v, %v", rep, err)
	}
	exec(t, raw(t, path), `UPDATE entries SET effect = replace(effect, 'L1', 'L2') WHERE idx = 3`)
	wantBad(t, l, 3, "")
}

// TestUpgradeFromVersion1: a log written before effects were recorded
// opens, is upgraded in place, verifies against its old checkpoint, and
// records effects from then on.
func TestUpgradeFromVersion1(t *testing.T) {
	ctx := context.Background()
	l, path := fill(t, 5)
	signed, err := l.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	db := raw(t, path)
	exec(t, db, `ALTER TABLE entries DROP COLUMN effect`)
	exec(t, db, `ALTER TABLE entries DROP COLUMN effect_outcome`)
	exec(t, db, `PRAGMA user_version = 1`)
	db.Close()

	l, err = Open(path)
	if err != nil {
		t.Fatalf("opening a version 1 log: %v", err)
	}
	defer l.Close()
	if rep, err := l.VerifyCheckpoint(ctx, signed); err != nil || !rep.OK() {
		t.Fatalf("the old checkpoint after the upgrade: %+v, %v", rep, err)
	}
	ev := kernel.AuditEvent{Task: "t1", Cap: "c1", Kind: "pay", Op: "call:charge", Decision: kernel.Outcome,
		Effect: &kernel.EffectRecord{Summary: "charge 390.00 EUR to airline.example", Outcome: "charged 390.00 EUR to airline.example (id ch_1, succeeded)"}}
	if err := l.ForRun("r1").Record(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if rep, err := l.Verify(ctx); err != nil || !rep.OK() || rep.Entries != 6 {
		t.Fatalf("verify after the upgrade: %+v, %v", rep, err)
	}
}
