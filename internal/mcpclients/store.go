// Package mcpclients keeps what each MCP client of "mandate mcp serve" has
// been shown: the client's label, which outlives its sessions. A client's
// model does not forget what it read when a connection ends, so neither
// does its label: a session of the client starts at the client's label,
// and every result a session shows raises the client's label for all of
// its sessions, live and to come.
//
//	st, err := mcpclients.Open(stateDir) // STATE/mcp-clients.db
//	if err != nil { ... }
//	defer st.Close()
//	l, _ := st.Label(ctx, "desk")        // the client's label now
//	st.Raise(ctx, "desk", mcpclients.Raise{Run: run, Tool: "my_benefits", Label: shown})
//
// A label only rises (the join of what was stored and what was shown, in
// one immediate transaction, so several processes on one state directory
// never lose a raise). It falls only by a person's act (ResetAudited, from
// "mandate mcp reset" at a terminal or the Reset button of the client's
// page in "mandate ui": the client's history and the audit log record who
// and why), or when the policy's label_ttl has passed since it was last
// raised (Expire, when a session starts). Each raise, reset and expiry is
// kept in the client's history, which "mandate ui" shows (GET /clients,
// /clients/NAME; it reads the store with OpenReadOnly).
package mcpclients

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/mandatevm/mandate/internal/sqlitedb"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// FileName is the store's file in the state directory.
const FileName = "mcp-clients.db"

// The store's schema. clients.raised is when the client was last shown a
// labelled result ("" never): label_ttl counts from it.
const schema = `
CREATE TABLE clients (
	name   TEXT PRIMARY KEY,
	label  TEXT NOT NULL,
	raised TEXT NOT NULL
);
CREATE TABLE history (
	seq    INTEGER PRIMARY KEY AUTOINCREMENT,
	client TEXT NOT NULL,
	time   TEXT NOT NULL,
	event  TEXT NOT NULL,
	run    TEXT NOT NULL,
	tool   TEXT NOT NULL,
	label  TEXT NOT NULL,
	by     TEXT NOT NULL,
	why    TEXT NOT NULL
);
CREATE INDEX history_client ON history (client, seq);
`

var config = sqlitedb.Config{
	What: "MCP clients store", AppID: 0x4d4e4d43, // "MNMC"
	Version: 1, Schema: schema,
	Pragmas: []string{"synchronous(FULL)"}, // a raise is on disk before the result is shown
}

// The events of a client's history.
const (
	EventRaise  = "raise"  // a result shown raised the label (Label: what was added)
	EventReset  = "reset"  // a person reset it (Label: what was dropped; By, Why)
	EventExpiry = "expiry" // label_ttl passed since its last raise (Label: what was dropped; Why)
)

// MaxName is the longest client name.
const MaxName = 64

// ValidName reports whether name is a client's name: 1 to MaxName of
// A-Z a-z 0-9 _ . -
func ValidName(name string) bool {
	if name == "" || len(name) > MaxName {
		return false
	}
	for _, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '-':
		default:
			return false
		}
	}
	return true
}

// Store is the MCP clients store of a state directory. It is safe for
// concurrent use, and by several processes.
type Store struct {
	db   *sql.DB
	path string
	// label is getLabel, prepared once: a session reads its client's
	// label before every call. Each read sees what was committed before
	// it, by any process.
	label *sql.Stmt
}

// getLabel reads a client's stored label and when it last rose.
const getLabel = "SELECT label, raised FROM clients WHERE name = ?"

// Open opens (creating if needed) the store of state directory dir.
func Open(dir string) (*Store, error) {
	path := filepath.Join(dir, FileName)
	db, err := sqlitedb.Open(path, config)
	if err != nil {
		return nil, err
	}
	return newStore(db, path)
}

func newStore(db *sql.DB, path string) (*Store, error) {
	label, err := db.Prepare(getLabel)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%s %s: %w", config.What, path, err)
	}
	return &Store{db: db, path: path, label: label}, nil
}

// OpenReadOnly opens the existing store of state directory dir for
// reading only (sqlitedb.OpenReadOnly: it creates and writes nothing, and
// works where dir cannot be written). A directory with no store yet is an
// error wrapping fs.ErrNotExist. Raise, Reset and Expire fail on it.
func OpenReadOnly(dir string) (*Store, error) {
	path := filepath.Join(dir, FileName)
	db, err := sqlitedb.OpenReadOnly(path, config)
	if err != nil {
		return nil, err
	}
	return newStore(db, path)
}

// Path is the store's file.
func (s *Store) Path() string { return s.path }

// Close closes the store.
func (s *Store) Close() error {
	s.label.Close()
	return s.db.Close()
}

// State is a client's stored label.
type State struct {
	Client string
	Label  kindapi.Label
	// Raised is when the client was last shown a labelled result (zero:
	// never, or not since its last reset or expiry).
	Raised time.Time
}

// Raise is a result shown to a client.
type Raise struct {
	Time  time.Time // default now
	Run   string    // the session's run
	Tool  string    // the tool whose result it was
	Label kindapi.Label
}

// Event is one entry of a client's history.
type Event struct {
	Seq    int64
	Client string
	Time   time.Time
	Event  string // EventRaise, EventReset or EventExpiry
	Run    string
	Tool   string
	Label  kindapi.Label
	By     string
	Why    string
}

// Label returns client's stored label (zero for a client never shown
// anything labelled).
func (s *Store) Label(ctx context.Context, client string) (State, error) {
	st, err := scanState(client, s.label.QueryRowContext(ctx, client))
	if err != nil {
		return State{}, s.wrap(err)
	}
	return st, nil
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func get(ctx context.Context, q querier, client string) (State, error) {
	return scanState(client, q.QueryRowContext(ctx, getLabel, client))
}

// scanState is the State of client that row (of getLabel) holds.
func scanState(client string, row *sql.Row) (State, error) {
	st := State{Client: client}
	var label, raised string
	switch err := row.Scan(&label, &raised); {
	case errors.Is(err, sql.ErrNoRows):
		return st, nil
	case err != nil:
		return st, err
	}
	if err := json.Unmarshal([]byte(label), &st.Label); err != nil {
		return st, fmt.Errorf("client %q: its label %q: %v", client, label, err)
	}
	if raised != "" {
		t, err := time.Parse(time.RFC3339Nano, raised)
		if err != nil {
			return st, fmt.Errorf("client %q: its raise time %q: %v", client, raised, err)
		}
		st.Raised = t
	}
	return st, nil
}

// Raise records that client was shown r.Label: its label becomes the
// join of the stored one and r.Label, in one immediate transaction (a
// label only rises, whoever writes at once), and its raise time r.Time
// (or now) when that is later. The history keeps a raise that changed
// the label. It returns the client's label after the raise.
func (s *Store) Raise(ctx context.Context, client string, r Raise) (kindapi.Label, error) {
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	var after kindapi.Label
	err := s.tx(ctx, func(tx *sql.Tx) error {
		st, err := get(ctx, tx, client)
		if err != nil {
			return err
		}
		after = st.Label.Join(r.Label)
		raised := st.Raised
		if r.Time.After(raised) {
			raised = r.Time
		}
		if after.String() == st.Label.String() && raised.Equal(st.Raised) {
			return nil
		}
		if err := put(ctx, tx, client, after, raised); err != nil {
			return err
		}
		if after.String() != st.Label.String() {
			return addEvent(ctx, tx, Event{Client: client, Time: r.Time, Event: EventRaise, Run: r.Run, Tool: r.Tool, Label: r.Label})
		}
		return nil
	})
	return after, s.wrap(err)
}

// Reset drops client's label, by a person's act: by names them, why is
// their reason. It returns the label dropped (zero when there was none:
// the reset is recorded all the same).
func (s *Store) Reset(ctx context.Context, client, by, why string) (kindapi.Label, error) {
	if by == "" || why == "" {
		return kindapi.Label{}, errors.New("mcpclients: a reset names who and why")
	}
	var before kindapi.Label
	err := s.tx(ctx, func(tx *sql.Tx) error {
		st, err := get(ctx, tx, client)
		if err != nil {
			return err
		}
		before = st.Label
		if err := put(ctx, tx, client, kindapi.Label{}, time.Time{}); err != nil {
			return err
		}
		return addEvent(ctx, tx, Event{Client: client, Time: time.Now(), Event: EventReset, Label: before, By: by, Why: why})
	})
	return before, s.wrap(err)
}

// Expire drops client's label when it was last raised longer than ttl
// before now (ttl zero: never), and records the expiry. It returns the
// label dropped, zero when none was.
func (s *Store) Expire(ctx context.Context, client string, ttl time.Duration, now time.Time) (kindapi.Label, error) {
	if ttl <= 0 {
		return kindapi.Label{}, nil
	}
	var dropped kindapi.Label
	err := s.tx(ctx, func(tx *sql.Tx) error {
		st, err := get(ctx, tx, client)
		if err != nil || st.Label.IsZero() || now.Sub(st.Raised) <= ttl {
			return err
		}
		dropped = st.Label
		if err := put(ctx, tx, client, kindapi.Label{}, time.Time{}); err != nil {
			return err
		}
		return addEvent(ctx, tx, Event{Client: client, Time: now, Event: EventExpiry, Label: dropped, By: "label_ttl",
			Why: fmt.Sprintf("last raised %s, more than label_ttl %v before", st.Raised.UTC().Format(time.RFC3339), ttl)})
	})
	return dropped, s.wrap(err)
}

// Clients returns every client the store knows, by name.
func (s *Store) Clients(ctx context.Context) ([]State, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT name FROM clients ORDER BY name")
	if err != nil {
		return nil, s.wrap(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, s.wrap(err)
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, s.wrap(err)
	}
	out := make([]State, 0, len(names))
	for _, n := range names {
		st, err := get(ctx, s.db, n)
		if err != nil {
			return nil, s.wrap(err)
		}
		out = append(out, st)
	}
	return out, nil
}

// History is client's history, oldest first.
func (s *Store) History(ctx context.Context, client string) ([]Event, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT seq, client, time, event, run, tool, label, by, why FROM history WHERE client = ? ORDER BY seq", client)
	if err != nil {
		return nil, s.wrap(err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		var t, label string
		if err := rows.Scan(&e.Seq, &e.Client, &t, &e.Event, &e.Run, &e.Tool, &label, &e.By, &e.Why); err != nil {
			return nil, s.wrap(err)
		}
		e.Time, _ = time.Parse(time.RFC3339Nano, t)
		if err := json.Unmarshal([]byte(label), &e.Label); err != nil {
			return nil, s.wrap(fmt.Errorf("history entry %d: its label: %v", e.Seq, err))
		}
		out = append(out, e)
	}
	return out, s.wrap(rows.Err())
}

func put(ctx context.Context, tx *sql.Tx, client string, l kindapi.Label, raised time.Time) error {
	b, _ := json.Marshal(l)
	r := ""
	if !raised.IsZero() {
		r = raised.UTC().Format(time.RFC3339Nano)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO clients (name, label, raised) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET label = excluded.label, raised = excluded.raised`, client, string(b), r)
	return err
}

func addEvent(ctx context.Context, tx *sql.Tx, e Event) error {
	b, _ := json.Marshal(e.Label)
	_, err := tx.ExecContext(ctx, "INSERT INTO history (client, time, event, run, tool, label, by, why) VALUES (?,?,?,?,?,?,?,?)",
		e.Client, e.Time.UTC().Format(time.RFC3339Nano), e.Event, e.Run, e.Tool, string(b), e.By, e.Why)
	return err
}

// tx runs f in one immediate transaction (sqlitedb opens every write
// transaction immediate: the read of a read-merge-write holds the lock).
func (s *Store) tx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *Store) wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %s: %w", config.What, s.path, err)
}
