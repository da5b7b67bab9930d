// Package runstore keeps the record of every run in an embedded SQLite
// database in the state directory (STATE/runs.db, WAL mode, no server): the
// run's metadata, its tasks, its capabilities with their scopes and
// constraints, the edges between them (derivation, spawn, holding), the
// denials, and the decisions where labels met sinks (flows). The audit log
// (package audit, STATE/audit.db) is the tamper-evident, per-decision
// record; the run store is the queryable picture of each run that
// "mandate runs" and "mandate graph RUN" read.
//
// A run is recorded twice: Begin when it starts (state "running"), Finish
// when it ends, in one transaction. A run whose process died in between
// stays "running" with no end time. Several processes may record runs at
// once: SQLite serializes the writers (WAL, a busy timeout, immediate
// transactions).
//
//	s, err := runstore.Open(stateDir)
//	defer s.Close()
//	_ = s.Begin(ctx, run)
//	... run the task ...
//	_ = s.Finish(ctx, runstore.Record{Run: run, Graph: k.Graph()}, events)
//	rec, err := s.Get(ctx, "") // the last run
//
// What each task left (Outputs: its result, its kept stdout and stderr) is
// stored as it is given: the host (package host) cuts each to the task's
// limits.stored_output (1 MiB by default) first, and an Output cut says so
// (Truncated, Dropped, and Size, the whole), so a large result does not
// grow the file by its size.
//
// The schema is versioned (PRAGMA user_version) and upgraded in place by
// migrations; a corrupted file, another program's database or a newer
// schema is an error naming the file, never a silent reset. Run records of
// earlier Mandate versions (STATE/runs/ID.json) are imported on Open.
package runstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/mandatevm/mandate/internal/sqlitedb"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// FileName is the store's file in the state directory.
const FileName = "runs.db"

// RecordVersion is the version of the JSON form of a Record (the contract
// of "mandate graph --format json").
const RecordVersion = 1

// Bounds on what one run stores; the audit log keeps everything.
const (
	MaxDenials   = 10000
	MaxFlows     = 10000
	MaxApprovals = 10000
	MaxEffects   = 1000
)

// schemaVersion is the schema this code writes; migrations upgrade older
// files.
const schemaVersion = 5

const schema = `
CREATE TABLE runs (
	seq       INTEGER PRIMARY KEY AUTOINCREMENT,
	id        TEXT NOT NULL UNIQUE,
	manifest  TEXT NOT NULL,
	task      TEXT NOT NULL,
	module    TEXT NOT NULL,
	digest    TEXT NOT NULL,
	principal TEXT NOT NULL,
	engine    TEXT NOT NULL,
	started   TEXT NOT NULL,          -- RFC 3339, UTC
	ended     TEXT,                   -- NULL while running (or if the process died)
	exit      INTEGER,
	state     TEXT NOT NULL,
	error     TEXT NOT NULL DEFAULT '',
	denials_dropped INTEGER NOT NULL DEFAULT 0,
	flows_dropped   INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE tasks (
	run       TEXT NOT NULL REFERENCES runs(id),
	ord       INTEGER NOT NULL,
	id        TEXT NOT NULL,
	parent    TEXT NOT NULL,
	principal TEXT NOT NULL,
	module    TEXT NOT NULL,
	state     TEXT NOT NULL,
	label     TEXT NOT NULL,          -- JSON
	clearance TEXT,                   -- JSON, NULL: unbounded
	denials   INTEGER NOT NULL,
	error     TEXT NOT NULL,
	PRIMARY KEY (run, id)
);
CREATE TABLE caps (
	run          TEXT NOT NULL REFERENCES runs(id),
	ord          INTEGER NOT NULL,
	id           TEXT NOT NULL,
	kind         TEXT NOT NULL,
	name         TEXT NOT NULL,
	holder       TEXT NOT NULL,
	parent       TEXT NOT NULL,
	scope        TEXT NOT NULL,       -- JSON
	revoked      INTEGER NOT NULL,
	dropped      INTEGER NOT NULL,
	audited      INTEGER NOT NULL,
	when_exprs   TEXT NOT NULL,       -- JSON list
	approve_when TEXT NOT NULL,       -- JSON list
	rate         TEXT NOT NULL,
	view         TEXT NOT NULL DEFAULT '{}', -- JSON: the kind's description, uses, budget (kernel.CapView)
	PRIMARY KEY (run, id)
);
-- derive: capability -> capability derived from it; spawn: task -> child
-- task; holds: task -> capability in its table; pass: task -> capability
-- it passed to a child (minted for the child by task_spawn).
CREATE TABLE edges (
	run  TEXT NOT NULL REFERENCES runs(id),
	kind TEXT NOT NULL CHECK (kind IN ('derive', 'spawn', 'holds', 'pass')),
	src  TEXT NOT NULL,
	dst  TEXT NOT NULL
);
CREATE INDEX edges_run ON edges (run, kind, src);
CREATE TABLE denials (
	run       TEXT NOT NULL REFERENCES runs(id),
	seq       INTEGER NOT NULL,
	time      TEXT NOT NULL,
	task      TEXT NOT NULL,
	principal TEXT NOT NULL,
	cap       TEXT NOT NULL,
	kind      TEXT NOT NULL,
	op        TEXT NOT NULL,
	errno     TEXT NOT NULL,
	reason    TEXT NOT NULL,
	label     TEXT NOT NULL,          -- JSON: the task's label at the decision
	PRIMARY KEY (run, seq)
);
CREATE TABLE flows (
	run       TEXT NOT NULL REFERENCES runs(id),
	seq       INTEGER NOT NULL,
	time      TEXT NOT NULL,
	task      TEXT NOT NULL,
	cap       TEXT NOT NULL,
	kind      TEXT NOT NULL,
	op        TEXT NOT NULL,
	decision  TEXT NOT NULL,
	errno     TEXT NOT NULL,
	label     TEXT NOT NULL,          -- JSON
	PRIMARY KEY (run, seq)
);
-- What each task left: its result and what was kept of its stdout and
-- stderr (each bounded by the task's limits.output).
CREATE TABLE outputs (
	run       TEXT NOT NULL REFERENCES runs(id),
	task      TEXT NOT NULL,
	stream    TEXT NOT NULL CHECK (stream IN ('result', 'stdout', 'stderr')),
	data      BLOB NOT NULL,
	truncated INTEGER NOT NULL,       -- the stream passed its limit
	dropped   INTEGER NOT NULL,       -- bytes past the limit, not kept
	PRIMARY KEY (run, task, stream)
);
` + approvalsTable + schema5

// schema5 holds what the run's calls did outside the kernel, and
// runs.effects_dropped how many more there were; and it marks the output
// a task wrote once it carried untrusted data its answer refuses
// (issue 27).
const schema5 = `CREATE TABLE effects (
	run       TEXT NOT NULL REFERENCES runs(id),
	seq       INTEGER NOT NULL,
	time      TEXT NOT NULL,
	task      TEXT NOT NULL,
	cap       TEXT NOT NULL,
	kind      TEXT NOT NULL,
	op        TEXT NOT NULL,
	summary   TEXT NOT NULL,          -- what was done, as the task wrote it
	outcome   TEXT NOT NULL,          -- how it came out
	errno     TEXT NOT NULL,          -- of an effect that failed after it may have happened
	PRIMARY KEY (run, seq)
);
ALTER TABLE runs ADD COLUMN effects_dropped INTEGER NOT NULL DEFAULT 0;
ALTER TABLE outputs ADD COLUMN withheld INTEGER NOT NULL DEFAULT 0;
`

// approvalsTable holds every question a person was asked about a call,
// and the answer (schema 4).
const approvalsTable = `CREATE TABLE approvals (
	run       TEXT NOT NULL REFERENCES runs(id),
	seq       INTEGER NOT NULL,
	time      TEXT NOT NULL,
	task      TEXT NOT NULL,
	cap       TEXT NOT NULL,
	kind      TEXT NOT NULL,
	op        TEXT NOT NULL,
	summary   TEXT NOT NULL,
	digest    TEXT NOT NULL,          -- the whole effect's
	answer    TEXT NOT NULL,          -- yes, no, remembered, failed
	channel   TEXT NOT NULL,
	by        TEXT NOT NULL,
	PRIMARY KEY (run, seq)
);
`

var config = sqlitedb.Config{
	What:    "run store",
	AppID:   0x4d4e5253, // "MNRS"
	Version: schemaVersion,
	Schema:  schema,
	Migrations: map[int]string{
		// 1 -> 2: the readable view of each capability (issue 10).
		// and the pass edges (a CHECK constraint cannot be altered: the
		// table is rebuilt).
		1: `ALTER TABLE caps ADD COLUMN view TEXT NOT NULL DEFAULT '{}';
CREATE TABLE edges_v2 (
	run  TEXT NOT NULL REFERENCES runs(id),
	kind TEXT NOT NULL CHECK (kind IN ('derive', 'spawn', 'holds', 'pass')),
	src  TEXT NOT NULL,
	dst  TEXT NOT NULL
);
INSERT INTO edges_v2 SELECT run, kind, src, dst FROM edges;
DROP TABLE edges;
ALTER TABLE edges_v2 RENAME TO edges;
CREATE INDEX edges_run ON edges (run, kind, src);`,
		// 2 -> 3: each task's result and kept output ("mandate logs").
		2: `CREATE TABLE outputs (
	run       TEXT NOT NULL REFERENCES runs(id),
	task      TEXT NOT NULL,
	stream    TEXT NOT NULL CHECK (stream IN ('result', 'stdout', 'stderr')),
	data      BLOB NOT NULL,
	truncated INTEGER NOT NULL,       -- the stream passed its limit
	dropped   INTEGER NOT NULL,       -- bytes past the limit, not kept
	PRIMARY KEY (run, task, stream)
);`,
		// 3 -> 4: the approvals asked and their answers (issue 25).
		3: approvalsTable,
		// 4 -> 5: the effects the run's calls had, and outputs withheld
		// as answers (issue 27).
		4: schema5,
	},
	Pragmas: []string{"synchronous(NORMAL)", "foreign_keys(1)"},
}

// Store is an open run store. It is safe for concurrent use.
type Store struct {
	db   *sql.DB
	path string
	dir  string
	live liveLocks // the runs this process began and has not finished

	readOnly bool // opened by OpenReadOnly

	// ords is where the next task and capability of a run this process
	// records go (their ord), once a write of it has read them: a run is
	// written by the one process that began it, and reading the maximum
	// again for every snapshot of a long run would cost a scan of all its
	// rows.
	ordsMu sync.Mutex
	ords   map[string]nextOrd

	// Imported are the legacy JSON records imported by Open; ImportErrors
	// are those that could not be (the files stay where they are).
	Imported     []string
	ImportErrors []error
}

// Open opens (creating if needed) the run store of state directory dir.
func Open(dir string) (*Store, error) {
	path := filepath.Join(dir, FileName)
	db, err := sqlitedb.Open(path, config)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, path: path, dir: dir}
	s.importLegacy(context.Background())
	return s, nil
}

// OpenReadOnly opens the existing run store of state directory dir for
// reading: it creates, upgrades and imports nothing, and works where dir
// cannot be written. A directory with no store is ErrNoRuns. Begin and
// Finish fail on it.
func OpenReadOnly(dir string) (*Store, error) {
	path := filepath.Join(dir, FileName)
	db, err := sqlitedb.OpenReadOnly(path, config)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s", ErrNoRuns, dir)
	}
	if err != nil {
		return nil, err
	}
	return &Store{db: db, path: path, dir: dir, readOnly: true}, nil
}

// Path is the store's file.
func (s *Store) Path() string { return s.path }

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

// Check is what a run asks of the store before its task runs: that the
// file is sound (PRAGMA quick_check) and can be written (a probe write is
// committed), so a damaged store is found before anything ran, not when
// the run's end cannot be recorded.
func (s *Store) Check(ctx context.Context) error {
	if s.readOnly {
		return s.errorf("opened read-only")
	}
	var qc string
	if err := s.db.QueryRowContext(ctx, "PRAGMA quick_check(1)").Scan(&qc); err != nil {
		return s.errorf("the file is damaged: %v", err)
	}
	if qc != "ok" {
		return s.errorf("the file is damaged: %s", qc)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.errorf("cannot be written: %v", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "UPDATE runs SET seq = seq WHERE seq = (SELECT max(seq) FROM runs)"); err != nil {
		return s.errorf("cannot be written: %v%s", err, sqlitedb.SpaceHint(s.dir))
	}
	if err := tx.Commit(); err != nil {
		return s.errorf("cannot be written: %v%s", err, sqlitedb.SpaceHint(s.dir))
	}
	return nil
}

// Run describes one run.
type Run struct {
	ID        string    `json:"id"`
	Manifest  string    `json:"manifest"`
	Task      string    `json:"task"`
	Module    string    `json:"module"` // path of the .wasm file or guest directory
	Digest    string    `json:"digest"`
	Principal string    `json:"principal"`
	Engine    string    `json:"engine"`
	Started   time.Time `json:"started"`
	Ended     time.Time `json:"ended"` // zero while running
	Exit      int       `json:"exit"`
	State     string    `json:"state"`
	Error     string    `json:"error,omitempty"`
}

// StateRunning is a run's state between Begin and Finish.
const StateRunning = "running"

// StateRefused is the state of a run that was recorded as started and then
// refused before its task ran (a module that does not compile, a grant or
// seed error): nothing ran.
const StateRefused = "refused"

// Record is a run as stored: its metadata, the kernel's graph at its end,
// and the denials. Its JSON form is "mandate graph --format json": the
// graph's fields (tasks, caps) sit at the top level next to run.
type Record struct {
	Version int `json:"version"`
	Run     Run `json:"run"`
	kernel.Graph
	// Denials are the run's refused calls, in order (at most MaxDenials;
	// DenialsDropped counts the rest, which are in the audit log).
	Denials        []Denial `json:"denials"`
	DenialsDropped int      `json:"denials_dropped,omitempty"`
	// Flows are the decisions where a task's label met a sink.
	Flows        []Flow `json:"flows"`
	FlowsDropped int    `json:"flows_dropped,omitempty"`
	// Approvals are the questions a person was asked about the run's
	// calls, with the answers (at most MaxApprovals; the audit log has
	// every one).
	Approvals []Approval `json:"approvals"`
	// Effects are what the run's calls did outside the kernel, as the
	// audit log records them (kernel.EffectRecord): each performed
	// effect's account and outcome, in order (at most MaxEffects;
	// EffectsDropped counts the rest, which are in the audit log). They
	// are what was done, whatever the task's result says.
	Effects        []Effect `json:"effects"`
	EffectsDropped int      `json:"effects_dropped,omitempty"`
	// Outputs are what the tasks left (results, kept stdout and stderr).
	// Finish stores them; Get does not read them (they are not part of
	// the graph): Outputs does.
	Outputs []Output `json:"-"`
}

// Output is what one task left on one stream: "result" (what it set with
// mandate.SetResult), "stdout" or "stderr" (what was kept of them, at
// most the task's limits.output). The store keeps at most the task's
// limits.stored_output of each (kernel.DefaultMaxStoredOutput, 1 MiB, by
// default): a longer one is cut by the host before it is written, and
// says so: Truncated, and Dropped the bytes not kept (past limits.output
// or past limits.stored_output), so Size, the stream's whole size, is
// len(Data) + Dropped.
type Output struct {
	Task      string `json:"task"`
	Stream    string `json:"stream"`
	Data      []byte `json:"data"`
	Truncated bool   `json:"truncated,omitempty"`
	Dropped   int64  `json:"dropped,omitempty"`
	// Withheld: the task wrote (some of) it once it carried untrusted
	// data that its answer refuses (result { accepts_untrusted = false } or refuses_taints):
	// it is not shown as the task's answer, only on request (mandate logs
	// --raw).
	Withheld bool `json:"withheld,omitempty"`
	// Size is len(Data) + Dropped (not stored: Outputs computes it).
	Size int64 `json:"size"`
}

// The streams of an Output.
const (
	StreamResult = "result"
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// Approval is one question a person was asked about a call, and its
// answer: Answer is "yes", "no", "remembered" (approve_mints: the same
// effect approved before in the task, not asked again), "plan" (an item
// of a plan the person approved, not asked again) or "failed" (the
// approver gave no answer: refused); Channel is how it came (terminal,
// web, cli, flag, client, timeout, none) and By who gave it.
type Approval struct {
	Time    time.Time `json:"time"`
	Task    string    `json:"task"`
	Cap     string    `json:"cap"`
	Kind    string    `json:"kind"`
	Op      string    `json:"op"`
	Summary string    `json:"summary"`
	Digest  string    `json:"digest"`
	Answer  string    `json:"answer"`
	Channel string    `json:"channel,omitempty"`
	By      string    `json:"by,omitempty"`
}

// Effect is one call's effect outside the kernel: Summary what was done,
// as the task wrote it (`POST https://book.example/book
// {"listing_id":"L1","guest":[spliced 0]}`), Outcome how it came out
// ("200"; "may have happened: ETIMEDOUT ..." for one that failed after it
// may have happened, with Errno).
type Effect struct {
	Time    time.Time `json:"time"`
	Task    string    `json:"task"`
	Cap     string    `json:"cap"`
	Kind    string    `json:"kind"`
	Op      string    `json:"op"`
	Summary string    `json:"summary"`
	Outcome string    `json:"outcome"`
	Errno   string    `json:"errno,omitempty"`
}

// Denial is one refused call.
type Denial struct {
	Time      time.Time     `json:"time"`
	Task      string        `json:"task"`
	Principal string        `json:"principal"`
	Cap       string        `json:"cap"`
	Kind      string        `json:"kind"`
	Op        string        `json:"op"`
	Errno     string        `json:"errno"`
	Reason    string        `json:"reason"`
	Label     kindapi.Label `json:"label"`
}

// Flow is a decision where labelled data met a sink: a refusal for the
// data's label (EFLOW), a declassification, or an audited call made by a
// task holding labelled data.
type Flow struct {
	Time     time.Time     `json:"time"`
	Task     string        `json:"task"`
	Cap      string        `json:"cap"`
	Kind     string        `json:"kind"`
	Op       string        `json:"op"`
	Decision string        `json:"decision"`
	Errno    string        `json:"errno"`
	Label    kindapi.Label `json:"label"`
}

var runIDRE = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z._-]{0,127}$`)

// ValidRunID reports whether id may name a run.
func ValidRunID(id string) bool {
	return runIDRE.MatchString(id) && !strings.Contains(id, "..")
}

// ErrNoRuns is returned by Get when nothing was recorded yet.
var ErrNoRuns = errors.New("no runs recorded yet")

// ErrNotFound is returned by Get for an unknown run.
var ErrNotFound = errors.New("no such run")

func (s *Store) errorf(format string, args ...any) error {
	return fmt.Errorf("run store %s: "+format, append([]any{s.path}, args...)...)
}

// Begin records that run r started; its state is "running" until Finish
// (reads report "crashed" once its process has ended without Finish).
func (s *Store) Begin(ctx context.Context, r Run) error {
	if s.readOnly {
		return s.errorf("opened read-only")
	}
	if !ValidRunID(r.ID) {
		return s.errorf("%q is not a run id", r.ID)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO runs (id, manifest, task, module, digest, principal, engine, started, state)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.Manifest, r.Task, r.Module, r.Digest, r.Principal, r.Engine, fmtTime(r.Started), StateRunning)
	if err != nil {
		return s.errorf("recording the start of run %s: %v", r.ID, err)
	}
	// Held until Finish, or until this process ends: a later read tells a
	// run that is still running from one whose process died.
	if err := s.hold(r.ID); err != nil {
		return s.errorf("run %s: the lock that shows it is running: %v", r.ID, err)
	}
	return nil
}

// Finish records how run rec.Run ended, with its graph, denials and flows,
// in one transaction: a reader sees the whole record or the running one.
// A run that was never begun is inserted whole.
func (s *Store) Finish(ctx context.Context, rec Record) error {
	if s.readOnly {
		return s.errorf("opened read-only")
	}
	r := rec.Run
	if !ValidRunID(r.ID) {
		return s.errorf("%q is not a run id", r.ID)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.errorf("%v", err)
	}
	defer tx.Rollback()
	if _, err := s.writeRecord(ctx, tx, rec); err != nil {
		return s.errorf("recording run %s: %v", r.ID, err)
	}
	if err := tx.Commit(); err != nil {
		return s.errorf("recording run %s: %v", r.ID, err)
	}
	s.remember(r.ID, nextOrd{}, true)
	s.release(r.ID)
	return nil
}

// Snapshot records the state so far of run rec.Run, still running (a
// long-lived run such as an MCP session, so "mandate graph" shows it live):
// its graph, denials and flows replace the last snapshot's; the run keeps
// its state "running" and its lock until Finish.
func (s *Store) Snapshot(ctx context.Context, rec Record) error {
	if s.readOnly {
		return s.errorf("opened read-only")
	}
	rec.Run.State, rec.Run.Ended = StateRunning, time.Time{}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.errorf("%v", err)
	}
	defer tx.Rollback()
	next, err := s.writeRecord(ctx, tx, rec)
	if err != nil {
		return s.errorf("recording run %s so far: %v", rec.Run.ID, err)
	}
	if err := tx.Commit(); err != nil {
		return s.errorf("recording run %s so far: %v", rec.Run.ID, err)
	}
	s.remember(rec.Run.ID, next, false)
	return nil
}

// nextOrd is where a run's next task and capability rows go.
type nextOrd struct{ task, cap int }

// writeRecord writes rec in tx, and returns where the run's next rows go.
func (s *Store) writeRecord(ctx context.Context, tx *sql.Tx, rec Record) (nextOrd, error) {
	s.ordsMu.Lock()
	next, known := s.ords[rec.Run.ID]
	s.ordsMu.Unlock()
	err := writeRecord(ctx, tx, rec, &next, known)
	return next, err
}

// remember records where a run's next rows go, once its write committed
// (forget: once it finished).
func (s *Store) remember(id string, next nextOrd, forget bool) {
	s.ordsMu.Lock()
	defer s.ordsMu.Unlock()
	if forget {
		delete(s.ords, id)
		return
	}
	if s.ords == nil {
		s.ords = map[string]nextOrd{}
	}
	s.ords[id] = next
}

func writeRecord(ctx context.Context, tx *sql.Tx, rec Record, next *nextOrd, known bool) error {
	r := rec.Run
	var ended any
	if !r.Ended.IsZero() {
		ended = fmtTime(r.Ended)
	}
	denials, flows := rec.Denials, rec.Flows
	dDropped, fDropped := rec.DenialsDropped, rec.FlowsDropped
	if len(denials) > MaxDenials {
		dDropped += len(denials) - MaxDenials
		denials = denials[:MaxDenials]
	}
	if len(flows) > MaxFlows {
		fDropped += len(flows) - MaxFlows
		flows = flows[:MaxFlows]
	}
	res, err := tx.ExecContext(ctx, `UPDATE runs SET manifest = ?, task = ?, module = ?, digest = ?, principal = ?, engine = ?,
		started = ?, ended = ?, exit = ?, state = ?, error = ?, denials_dropped = ?, flows_dropped = ? WHERE id = ?`,
		r.Manifest, r.Task, r.Module, r.Digest, r.Principal, r.Engine, fmtTime(r.Started), ended, r.Exit, r.State, r.Error,
		dDropped, fDropped, r.ID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO runs (id, manifest, task, module, digest, principal, engine, started, ended, exit, state, error, denials_dropped, flows_dropped)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.Manifest, r.Task, r.Module, r.Digest, r.Principal, r.Engine, fmtTime(r.Started), ended, r.Exit, r.State, r.Error,
			dDropped, fDropped); err != nil {
			return err
		}
	}
	// Denials and flows are replaced; tasks and capabilities are
	// upserted, and the outputs of the tasks in rec replaced. A long-lived
	// run's kernel forgets the tasks that ended once they are recorded
	// (kernel.Forget, see package host), so a later snapshot lacks them:
	// their rows stay as last written. A row already recorded keeps its
	// place (ord) and its edges, which follow from what never changes (a
	// task's parent, a capability's parent and holder); a new one goes
	// after every row of the run.
	for _, table := range []string{"denials", "flows", "approvals", "effects"} {
		if _, err := tx.ExecContext(ctx, "DELETE FROM "+table+" WHERE run = ?", r.ID); err != nil {
			return err
		}
	}
	edge, err := tx.PrepareContext(ctx, "INSERT INTO edges (run, kind, src, dst) VALUES (?, ?, ?, ?)")
	if err != nil {
		return err
	}
	defer edge.Close()
	if !known {
		if err := tx.QueryRowContext(ctx, "SELECT coalesce(max(ord) + 1, 0) FROM tasks WHERE run = ?", r.ID).Scan(&next.task); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, "SELECT coalesce(max(ord) + 1, 0) FROM caps WHERE run = ?", r.ID).Scan(&next.cap); err != nil {
			return err
		}
	}
	taskOrd, capOrd := &next.task, &next.cap
	for _, t := range rec.Tasks {
		label, _ := json.Marshal(t.Label)
		var clearance any
		if t.Clearance != nil {
			b, _ := json.Marshal(t.Clearance)
			clearance = string(b)
		}
		res, err := tx.ExecContext(ctx, `UPDATE tasks SET parent = ?, principal = ?, module = ?, state = ?, label = ?, clearance = ?, denials = ?, error = ?
			WHERE run = ? AND id = ?`,
			t.Parent, t.Principal, t.Module, string(t.State), string(label), clearance, t.Denials, t.Error, r.ID, t.ID)
		if err != nil {
			return fmt.Errorf("task %s: %w", t.ID, err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO tasks (run, ord, id, parent, principal, module, state, label, clearance, denials, error)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, *taskOrd, t.ID, t.Parent, t.Principal, t.Module, string(t.State), string(label), clearance, t.Denials, t.Error); err != nil {
			return fmt.Errorf("task %s: %w", t.ID, err)
		}
		*taskOrd++
		if t.Parent != "" {
			if _, err := edge.ExecContext(ctx, r.ID, "spawn", t.Parent, t.ID); err != nil {
				return err
			}
		}
	}
	holders := make(map[string]string, len(rec.Caps))
	for _, c := range rec.Caps {
		holders[c.ID] = c.Holder
	}
	for _, c := range rec.Caps {
		scope := string(c.Scope)
		if scope == "" {
			scope = "null"
		}
		when, _ := json.Marshal(nonNil(c.When))
		appr, _ := json.Marshal(nonNil(c.ApproveWhen))
		view, err := json.Marshal(c.View)
		if err != nil {
			return fmt.Errorf("cap %s: view: %w", c.ID, err)
		}
		res, err := tx.ExecContext(ctx, `UPDATE caps SET kind = ?, name = ?, holder = ?, parent = ?, scope = ?, revoked = ?, dropped = ?, audited = ?,
			when_exprs = ?, approve_when = ?, rate = ?, view = ? WHERE run = ? AND id = ?`,
			c.Kind, c.Name, c.Holder, c.Parent, scope, c.Revoked, c.Dropped, c.Audited, string(when), string(appr), c.Rate, string(view), r.ID, c.ID)
		if err != nil {
			return fmt.Errorf("cap %s: %w", c.ID, err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO caps (run, ord, id, kind, name, holder, parent, scope, revoked, dropped, audited, when_exprs, approve_when, rate, view)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, *capOrd, c.ID, c.Kind, c.Name, c.Holder, c.Parent, scope, c.Revoked, c.Dropped, c.Audited, string(when), string(appr), c.Rate, string(view)); err != nil {
			return fmt.Errorf("cap %s: %w", c.ID, err)
		}
		*capOrd++
		if c.Parent != "" {
			if _, err := edge.ExecContext(ctx, r.ID, "derive", c.Parent, c.ID); err != nil {
				return err
			}
		}
		if c.Holder != "" {
			if _, err := edge.ExecContext(ctx, r.ID, "holds", c.Holder, c.ID); err != nil {
				return err
			}
		}
		if c.View.Passed && holders[c.Parent] != "" {
			if _, err := edge.ExecContext(ctx, r.ID, "pass", holders[c.Parent], c.ID); err != nil {
				return err
			}
		}
	}
	for i, d := range denials {
		label, _ := json.Marshal(d.Label)
		if _, err := tx.ExecContext(ctx, `INSERT INTO denials (run, seq, time, task, principal, cap, kind, op, errno, reason, label)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, i, fmtTime(d.Time), d.Task, d.Principal, d.Cap, d.Kind, d.Op, d.Errno, d.Reason, string(label)); err != nil {
			return err
		}
	}
	for i, f := range flows {
		label, _ := json.Marshal(f.Label)
		if _, err := tx.ExecContext(ctx, `INSERT INTO flows (run, seq, time, task, cap, kind, op, decision, errno, label)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, i, fmtTime(f.Time), f.Task, f.Cap, f.Kind, f.Op, f.Decision, f.Errno, string(label)); err != nil {
			return err
		}
	}
	for i, a := range rec.Approvals {
		if i == MaxApprovals {
			break
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO approvals (run, seq, time, task, cap, kind, op, summary, digest, answer, channel, by)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, i, fmtTime(a.Time), a.Task, a.Cap, a.Kind, a.Op, a.Summary, a.Digest, a.Answer, a.Channel, a.By); err != nil {
			return err
		}
	}
	effects, eDropped := rec.Effects, rec.EffectsDropped
	if len(effects) > MaxEffects {
		eDropped += len(effects) - MaxEffects
		effects = effects[:MaxEffects]
	}
	if _, err := tx.ExecContext(ctx, "UPDATE runs SET effects_dropped = ? WHERE id = ?", eDropped, r.ID); err != nil {
		return err
	}
	for i, e := range effects {
		if _, err := tx.ExecContext(ctx, `INSERT INTO effects (run, seq, time, task, cap, kind, op, summary, outcome, errno)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, i, fmtTime(e.Time), e.Task, e.Cap, e.Kind, e.Op, e.Summary, e.Outcome, e.Errno); err != nil {
			return err
		}
	}
	// A task in the record has the outputs the record gives it, no more.
	for _, t := range rec.Tasks {
		if _, err := tx.ExecContext(ctx, "DELETE FROM outputs WHERE run = ? AND task = ?", r.ID, t.ID); err != nil {
			return err
		}
	}
	for _, o := range rec.Outputs {
		data := o.Data
		if data == nil {
			data = []byte{}
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO outputs (run, task, stream, data, truncated, dropped, withheld) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			r.ID, o.Task, o.Stream, data, o.Truncated, o.Dropped, o.Withheld); err != nil {
			return fmt.Errorf("output %s of task %s: %w", o.Stream, o.Task, err)
		}
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func parseTime(s string) (time.Time, error) { return time.Parse(time.RFC3339Nano, s) }
