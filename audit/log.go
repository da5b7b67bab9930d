// Package audit is Mandate's tamper-evident audit log: every decision the
// kernel records (kernel.Auditor) is appended to an RFC 6962 Merkle log
// (golang.org/x/mod/sumdb/tlog) kept in its own SQLite file, and the tree
// head can be signed as a checkpoint with an Ed25519 key
// (golang.org/x/mod/sumdb/note) generated on first use.
//
// An entry is the canonical JSON of an [Entry]: its sequence number, time,
// run, task, principal, module, capability id, kind, op, decision, errno
// and reason, and, on the outcome entry of a call that changed something
// outside the kernel, what the effect was and how it came out (effect,
// effect_outcome: the kind's account as the task wrote it, never a spliced
// blob, and withheld when the task's label had confidentiality tags).
// Entries never contain call arguments otherwise. Record is write-ahead:
// the entry is committed (fsync'd, synchronous=FULL) before it returns,
// and an error from it denies the call. Concurrent Record calls are
// group-committed: callers that arrive while a commit is in flight share
// the next transaction. RecordAll (kernel.BatchAuditor) commits several
// entries of one act together, next to each other: the kernel's spawn.
//
// Verify re-reads every entry, recomputes the leaf hashes and the tree,
// and compares them with the stored hashes and with every signed
// checkpoint; it names the first entry that does not match.
//
// Example:
//
//	log, err := audit.Open(filepath.Join(stateDir, "audit.db"))
//	if err != nil { ... }
//	defer log.Close()
//	k, err := kernel.New(kernel.Config{Engine: eng, Auditor: log.ForRun(runID)})
//	... // every audited allow and every denial is now durable before its effect
//
//	signed, err := log.Checkpoint() // a signed note: tree size and root hash
//	rep, err := log.Verify(ctx)     // err is a *TamperError naming the first bad entry
//	fmt.Println(log.VerifierKey())  // publish to check checkpoints offline (OpenCheckpoint)
//
// Schema (SQLite application_id "MNDA", user_version 2; a version 1 file
// is upgraded in place):
//
//	entries(idx INTEGER PRIMARY KEY, time, run, task, principal, module,
//	        cap, ancestry, kind, op, args, decision, errno, reason, label,
//	        effect, effect_outcome)                   -- idx = seq = tlog record index
//	hashes(idx INTEGER PRIMARY KEY, hash BLOB)        -- tlog stored hashes (tlog.StoredHashIndex)
//	tree(id = 0, size)                                -- number of entries in the tree
//	checkpoints(id INTEGER PRIMARY KEY, size, hash, signed, time)
//
// The leaf hash of entry i is tlog.RecordHash(canonical JSON) and is the
// stored hash at tlog.StoredHashIndex(0, i).
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
	"time"

	"github.com/mandatevm/mandate/kernel"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mandatevm/mandate/internal/sqlitedb"
)

const (
	schemaVersion = 2
	applicationID = 0x4d4e4441 // "MNDA"
	// KeyFile is the name of the signing key file, next to the database.
	KeyFile = "audit.key"
	keyName = "mandate-audit"
)

const schema = `
CREATE TABLE entries (
	idx       INTEGER PRIMARY KEY, -- seq, the tlog record index
	time      TEXT NOT NULL,       -- RFC 3339, nanoseconds, UTC
	run       TEXT NOT NULL,
	task      TEXT NOT NULL,
	principal TEXT NOT NULL,
	module    TEXT NOT NULL,
	cap       TEXT NOT NULL,
	ancestry  TEXT NOT NULL,       -- the cap's derivation chain, root first
	kind      TEXT NOT NULL,
	op        TEXT NOT NULL,
	args      TEXT NOT NULL,       -- SHA-256 of the call's arguments, or ""
	decision  TEXT NOT NULL,
	errno     TEXT NOT NULL,
	reason    TEXT NOT NULL,
	label     TEXT NOT NULL,       -- the task's label at the decision
	effect    TEXT NOT NULL DEFAULT '', -- what an effect was (an outcome entry), or ""
	effect_outcome TEXT NOT NULL DEFAULT '' -- how it came out, or ""
);
CREATE INDEX entries_run_task ON entries (run, task);
CREATE TABLE hashes (
	idx  INTEGER PRIMARY KEY, -- tlog stored hash index
	hash BLOB NOT NULL
);
CREATE TABLE tree (
	id   INTEGER PRIMARY KEY CHECK (id = 0),
	size INTEGER NOT NULL
);
INSERT INTO tree (id, size) VALUES (0, 0);
CREATE TABLE checkpoints (
	id     INTEGER PRIMARY KEY,
	size   INTEGER NOT NULL,
	hash   BLOB NOT NULL,
	signed BLOB NOT NULL,
	time   TEXT NOT NULL
);
`

// config describes the log's file.
var config = sqlitedb.Config{
	What: "audit log", AppID: applicationID, Version: schemaVersion, Schema: schema,
	Pragmas: []string{"synchronous(FULL)"}, // write-ahead: a commit is on disk
	Migrations: map[int]string{
		// 1 -> 2: what an effect was and how it came out (issue 27). An
		// old entry has neither, and its canonical JSON is unchanged.
		1: `ALTER TABLE entries ADD COLUMN effect TEXT NOT NULL DEFAULT '';
ALTER TABLE entries ADD COLUMN effect_outcome TEXT NOT NULL DEFAULT '';`,
	},
}

// Entry is one audit log entry. Its canonical JSON (this struct, fields in
// this order, as encoding/json writes it) is the tlog record.
type Entry struct {
	Seq       int64  `json:"seq"`
	Time      string `json:"time"` // RFC 3339 with nanoseconds, UTC
	Run       string `json:"run"`
	Task      string `json:"task"`
	Principal string `json:"principal"`
	Module    string `json:"module"`
	Cap       string `json:"cap"`
	Ancestry  string `json:"ancestry"` // the cap's derivation chain, root first: "c1,c4"
	Kind      string `json:"kind"`
	Op        string `json:"op"`
	Args      string `json:"args"` // SHA-256 of the call's arguments (never the arguments), or ""
	Decision  string `json:"decision"`
	Errno     string `json:"errno"`
	Reason    string `json:"reason"`
	Label     string `json:"label"` // the task's label at the decision
	// Effect and EffectOutcome are set on the outcome entry of a call that
	// changed something outside the kernel (kernel.EffectRecord): what
	// was done, as the task wrote it, and how it came out. Empty, they
	// are left out of the canonical JSON, so entries written before they
	// existed keep their bytes.
	Effect        string `json:"effect,omitempty"`
	EffectOutcome string `json:"effect_outcome,omitempty"`
}

// canonical returns the entry's record bytes.
func (e *Entry) canonical() []byte {
	b, err := json.Marshal(e)
	if err != nil { // strings only: cannot happen
		panic(err)
	}
	return b
}

// Log is an audit log. It implements kernel.Auditor (entries with an empty
// run; see ForRun) and is safe for concurrent use.
type Log struct {
	db     *sql.DB
	path   string
	signer note.Signer
	vkey   string
	verif  note.Verifier

	mu      sync.Mutex // guards queue and writing
	queue   []*pending
	writing bool

	// The statements of append, prepared once (each transaction uses
	// them through Tx.StmtContext).
	getSize, insE, insH, selH, setSize *sql.Stmt
}

type pending struct {
	es   []Entry // one caller's entries, committed together
	done chan error
}

// entriesOf is every entry of batch, in order.
func entriesOf(batch []*pending) []*Entry {
	var out []*Entry
	for _, p := range batch {
		for i := range p.es {
			out = append(out, &p.es[i])
		}
	}
	return out
}

var _ kernel.Auditor = (*Log)(nil)

// Open opens (creating if needed) the audit log at path and its signing
// key, KeyFile in the same directory (created with mode 0600 on first use;
// a key file readable by group or others is refused). A file that is not a
// SQLite database, or a database that is not a Mandate audit log, is a
// clear error.
func Open(path string) (*Log, error) {
	if path == "" {
		return nil, errors.New("audit log: empty path")
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("audit log %s: %w", path, err)
	}
	signer, verif, vkey, err := loadKey(filepath.Join(dir, KeyFile))
	if err != nil {
		return nil, fmt.Errorf("audit log %s: %w", path, err)
	}
	db, err := sqlitedb.Open(path, config)
	if err != nil {
		return nil, err
	}
	l := &Log{db: db, path: path, signer: signer, verif: verif, vkey: vkey}
	for _, st := range []struct {
		s **sql.Stmt
		q string
	}{
		{&l.getSize, "SELECT size FROM tree WHERE id = 0"},
		{&l.insE, `INSERT INTO entries (idx, time, run, task, principal, module, cap, ancestry, kind, op, args, decision, errno, reason, label, effect, effect_outcome) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`},
		{&l.insH, `INSERT INTO hashes (idx, hash) VALUES (?, ?)`},
		{&l.selH, `SELECT hash FROM hashes WHERE idx = ?`},
		{&l.setSize, "UPDATE tree SET size = ? WHERE id = 0"},
	} {
		if *st.s, err = db.Prepare(st.q); err != nil {
			l.Close()
			return nil, fmt.Errorf("audit log %s: %w", path, err)
		}
	}
	return l, nil
}

// Path returns the database file.
func (l *Log) Path() string { return l.path }

// Close closes the database.
func (l *Log) Close() error {
	for _, st := range []*sql.Stmt{l.getSize, l.insE, l.insH, l.selH, l.setSize} {
		if st != nil {
			st.Close()
		}
	}
	return l.db.Close()
}

// VerifierKey returns the public note verifier key of the log's signing
// key ("mandate-audit+<hash>+<key>"), to check checkpoints offline.
func (l *Log) VerifierKey() string { return l.vkey }

// Record appends ev with an empty run (see ForRun). It returns once the
// entry is committed; an error means it may not be, and the kernel denies
// the call. Cancelling ctx after the entry is queued does not withdraw it.
func (l *Log) Record(ctx context.Context, ev kernel.AuditEvent) error {
	return l.record(ctx, "", ev)
}

// RecordAll appends evs, with an empty run, in one transaction: they are
// committed together, in order and next to each other, or none is
// (kernel.BatchAuditor).
func (l *Log) RecordAll(ctx context.Context, evs []kernel.AuditEvent) error {
	return l.record(ctx, "", evs...)
}

// ForRun returns a kernel.Auditor that appends to l with Run set to run.
func (l *Log) ForRun(run string) kernel.Auditor { return runAuditor{l, run} }

type runAuditor struct {
	l   *Log
	run string
}

func (a runAuditor) Record(ctx context.Context, ev kernel.AuditEvent) error {
	return a.l.record(ctx, a.run, ev)
}

// RecordAll implements kernel.BatchAuditor.
func (a runAuditor) RecordAll(ctx context.Context, evs []kernel.AuditEvent) error {
	return a.l.record(ctx, a.run, evs...)
}

func clean(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// record appends evs and returns once they are committed, in one
// transaction and in order, with no other entry between them. Callers that
// arrive while a commit is in flight are queued, and the first of them
// commits the whole queue in one transaction (group commit).
func (l *Log) record(ctx context.Context, run string, evs ...kernel.AuditEvent) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	if len(evs) == 0 {
		return nil
	}
	p := &pending{done: make(chan error, 1), es: make([]Entry, len(evs))}
	for i, ev := range evs {
		t := ev.Time
		if t.IsZero() {
			t = time.Now()
		}
		p.es[i] = Entry{
			Time:      t.UTC().Format(time.RFC3339Nano),
			Run:       clean(run),
			Task:      clean(ev.Task),
			Principal: clean(ev.Principal),
			Module:    clean(ev.Module),
			Cap:       clean(ev.Cap),
			Ancestry:  clean(strings.Join(ev.Ancestry, ",")),
			Args:      ev.ArgsDigest,
			Label:     clean(ev.Label.String()),
			Kind:      clean(ev.Kind),
			Op:        clean(ev.Op),
			Decision:  clean(string(ev.Decision)),
			Errno:     ev.Errno.String(),
			Reason:    clean(ev.Reason),
		}
		if ev.Effect != nil {
			p.es[i].Effect, p.es[i].EffectOutcome = clean(ev.Effect.Summary), clean(ev.Effect.Outcome)
		}
	}
	l.mu.Lock()
	l.queue = append(l.queue, p)
	if l.writing {
		l.mu.Unlock()
		// Not abandoned on ctx cancellation: the entry may already be
		// committing, and the caller must know whether it was.
		return <-p.done
	}
	l.writing = true
	for len(l.queue) > 0 {
		batch := l.queue
		l.queue = nil
		l.mu.Unlock()
		err := l.append(batch)
		for _, b := range batch {
			b.done <- err
		}
		l.mu.Lock()
	}
	l.writing = false
	l.mu.Unlock()
	return <-p.done
}

// append writes a batch in one transaction, assigning sequence numbers.
func (l *Log) append(batch []*pending) (err error) {
	ctx := context.Background()
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("audit log %s: %w", l.path, err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
			err = fmt.Errorf("audit log %s: %w", l.path, err)
		}
	}()
	var n int64
	if err := tx.StmtContext(ctx, l.getSize).QueryRowContext(ctx).Scan(&n); err != nil {
		return err
	}
	insE := tx.StmtContext(ctx, l.insE)
	insH := tx.StmtContext(ctx, l.insH)
	selH := tx.StmtContext(ctx, l.selH)
	// Hashes written in this batch are also kept here: most reads of
	// StoredHashes are of the batch's own right edge.
	fresh := map[int64]tlog.Hash{}
	reader := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			if h, ok := fresh[x]; ok {
				out[i] = h
				continue
			}
			var b []byte
			if err := selH.QueryRowContext(ctx, x).Scan(&b); err != nil {
				return nil, fmt.Errorf("stored hash %d: %w", x, err)
			}
			if len(b) != tlog.HashSize {
				return nil, fmt.Errorf("stored hash %d: %d bytes", x, len(b))
			}
			copy(out[i][:], b)
		}
		return out, nil
	})
	for _, e := range entriesOf(batch) {
		e.Seq = n
		if _, err := insE.ExecContext(ctx, e.Seq, e.Time, e.Run, e.Task, e.Principal, e.Module, e.Cap, e.Ancestry, e.Kind, e.Op, e.Args, e.Decision, e.Errno, e.Reason, e.Label, e.Effect, e.EffectOutcome); err != nil {
			return err
		}
		hs, err := tlog.StoredHashes(n, e.canonical(), reader)
		if err != nil {
			return err
		}
		base := tlog.StoredHashCount(n)
		for i, h := range hs {
			fresh[base+int64(i)] = h
			if _, err := insH.ExecContext(ctx, base+int64(i), h[:]); err != nil {
				return err
			}
		}
		n++
	}
	if _, err := tx.StmtContext(ctx, l.setSize).ExecContext(ctx, n); err != nil {
		return err
	}
	return tx.Commit()
}

// Filter selects entries. Zero fields select everything.
type Filter struct {
	Run    string
	Task   string
	Denied bool  // only denials
	From   int64 // only entries with seq >= From
	Before int64 // only entries with seq < Before; 0: no bound
}

// Entries returns the entries matching f, in log order.
func (l *Log) Entries(ctx context.Context, f Filter) ([]Entry, error) {
	q := `SELECT ` + entryColumns + ` FROM entries WHERE 1=1`
	var args []any
	if f.Run != "" {
		q += " AND run = ?"
		args = append(args, f.Run)
	}
	if f.Task != "" {
		q += " AND task = ?"
		args = append(args, f.Task)
	}
	if f.Denied {
		q += " AND decision = ?"
		args = append(args, string(kernel.Deny))
	}
	if f.From > 0 {
		q += " AND idx >= ?"
		args = append(args, f.From)
	}
	if f.Before > 0 {
		q += " AND idx < ?"
		args = append(args, f.Before)
	}
	q += " ORDER BY idx"
	rows, err := l.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		var e Entry
		if err := scanEntry(rows, &e); err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return out, nil
}

// entryColumns are the columns scanEntry reads, in its order.
const entryColumns = `idx, time, run, task, principal, module, cap, ancestry, kind, op, args, decision, errno, reason, label, effect, effect_outcome`

func scanEntry(rows *sql.Rows, e *Entry) error {
	return rows.Scan(&e.Seq, &e.Time, &e.Run, &e.Task, &e.Principal, &e.Module, &e.Cap, &e.Ancestry, &e.Kind, &e.Op, &e.Args, &e.Decision, &e.Errno, &e.Reason, &e.Label, &e.Effect, &e.EffectOutcome)
}
