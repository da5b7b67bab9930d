package approvals

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/mandatevm/mandate/internal/sqlitedb"
	"github.com/mandatevm/mandate/kernel"
)

// FileName is the store's file in the state directory.
const FileName = "approvals.db"

// Sentinel errors; the errors returned wrap them with the approval's id
// and what happened to it.
var (
	ErrNotFound   = errors.New("no such approval")
	ErrNotPending = errors.New("the approval is not pending (answered, expired or withdrawn)")
	ErrNonce      = errors.New("the page's one-time nonce does not match (reload the approval's page)")
)

// States of an approval.
const (
	StatePending   = "pending"
	StateApproved  = "approved"
	StateRefused   = "refused"
	StateExpired   = "expired"
	StateWithdrawn = "withdrawn"
)

// NoteWaiterEnded is the Note of a pending approval whose waiting process
// ended without withdrawing it.
const NoteWaiterEnded = "the waiting process ended"

// Approval is one question to a person and, once given, its answer.
type Approval struct {
	ID       string                 `json:"id"`            // 16 lowercase hex characters, random
	Run      string                 `json:"run,omitempty"` // the run asking (run store id), if known
	Waiter   string                 `json:"waiter"`        // who waits, e.g. "mandate mcp serve desk.hcl"
	PID      int                    `json:"pid"`           // the waiting process
	Request  kernel.ApprovalRequest `json:"request"`       // whole: every detail uncut
	State    string                 `json:"state"`
	Created  time.Time              `json:"created"`
	Expires  time.Time              `json:"expires"`
	Answered time.Time              `json:"answered,omitzero"`
	Channel  string                 `json:"channel,omitempty"`
	By       string                 `json:"by,omitempty"`
	Note     string                 `json:"note,omitempty"` // why expired or withdrawn
}

// Pending reports whether a is still waiting for its answer.
func (a Approval) Pending() bool { return a.State == StatePending }

// schemaVersion is the schema this code writes.
const schemaVersion = 1

// The nonce is emptied once the approval is no longer pending: it is
// used once. host is the waiter's host name: its PID is checked only there.
const schema = `
CREATE TABLE approvals (
	seq      INTEGER PRIMARY KEY AUTOINCREMENT,
	id       TEXT NOT NULL UNIQUE,
	run      TEXT NOT NULL,
	waiter   TEXT NOT NULL,
	pid      INTEGER NOT NULL,
	host     TEXT NOT NULL,
	request  TEXT NOT NULL,          -- JSON kernel.ApprovalRequest, whole
	state    TEXT NOT NULL,
	nonce    TEXT NOT NULL,          -- hex, 256 bits; '' once not pending
	created  INTEGER NOT NULL,       -- Unix nanoseconds
	expires  INTEGER NOT NULL,       -- Unix nanoseconds
	answered INTEGER NOT NULL DEFAULT 0,
	channel  TEXT NOT NULL DEFAULT '',
	by_whom  TEXT NOT NULL DEFAULT '',
	note     TEXT NOT NULL DEFAULT ''
);
CREATE INDEX approvals_run ON approvals(run);
CREATE INDEX approvals_state ON approvals(state);
`

var dbConfig = sqlitedb.Config{
	What: "approvals store", AppID: 0x4d4e4150, // "MNAP"
	Version: schemaVersion, Schema: schema,
	Pragmas: []string{"synchronous(NORMAL)"},
}

// Store is the pending approvals of one state directory. Its methods are
// safe for concurrent use, and several processes may use the same file.
type Store struct {
	db   *sql.DB
	host string
	now  func() time.Time
}

// Open opens (creating it if needed) STATE/approvals.db.
func Open(stateDir string) (*Store, error) {
	if stateDir == "" {
		return nil, errors.New("approvals store: no state directory")
	}
	path := filepath.Join(stateDir, FileName)
	db, err := sqlitedb.Open(path, dbConfig)
	if err != nil {
		return nil, err
	}
	// It holds the nonces of pending approvals: for this user only.
	_ = os.Chmod(path, 0o600)
	host, _ := os.Hostname()
	return &Store{db: db, host: host, now: time.Now}, nil
}

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

var idPattern = regexp.MustCompile(`^[0-9a-f]{16}$`)

// ValidID reports whether id has the form of an approval's id.
func ValidID(id string) bool { return idPattern.MatchString(id) }

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// Add records a pending approval: it fills in ID, a one-time nonce (256
// bits, never part of Approval), Created, State, and PID when zero (this
// process). Expires must be set.
func (s *Store) Add(ctx context.Context, a Approval) (Approval, error) {
	if a.Expires.IsZero() {
		return Approval{}, errors.New("approvals: an approval needs its expiry (Expires)")
	}
	req, err := json.Marshal(a.Request)
	if err != nil {
		return Approval{}, fmt.Errorf("approvals: encoding the request: %w", err)
	}
	nonce, err := randomHex(32)
	if err != nil {
		return Approval{}, fmt.Errorf("approvals: a nonce: %w", err)
	}
	if a.PID == 0 {
		a.PID = os.Getpid()
	}
	a.Created = s.now().UTC()
	a.Expires = a.Expires.UTC()
	a.State = StatePending
	a.Answered, a.Channel, a.By, a.Note = time.Time{}, "", "", ""
	for range 3 { // a collision of 64 random bits: draw again
		if a.ID, err = randomHex(8); err != nil {
			return Approval{}, fmt.Errorf("approvals: an id: %w", err)
		}
		_, err = s.db.ExecContext(ctx, `INSERT INTO approvals (id, run, waiter, pid, host, request, state, nonce, created, expires)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			a.ID, a.Run, a.Waiter, a.PID, s.host, string(req), StatePending, nonce, a.Created.UnixNano(), a.Expires.UnixNano())
		if err == nil || !strings.Contains(err.Error(), "UNIQUE") {
			break
		}
	}
	if err != nil {
		return Approval{}, fmt.Errorf("approvals: recording an approval: %w", err)
	}
	return a, nil
}

// row is an approval as stored.
type row struct {
	Approval
	host  string
	nonce string
}

const columns = `id, run, waiter, pid, host, request, state, nonce, created, expires, answered, channel, by_whom, note`

type scanner interface{ Scan(...any) error }

func scanRow(sc scanner) (row, error) {
	var r row
	var req string
	var created, expires, answered int64
	if err := sc.Scan(&r.ID, &r.Run, &r.Waiter, &r.PID, &r.host, &req, &r.State, &r.nonce,
		&created, &expires, &answered, &r.Channel, &r.By, &r.Note); err != nil {
		return row{}, err
	}
	if err := json.Unmarshal([]byte(req), &r.Request); err != nil {
		return row{}, fmt.Errorf("approval %s: its request cannot be read: %w", r.ID, err)
	}
	r.Created = time.Unix(0, created).UTC()
	r.Expires = time.Unix(0, expires).UTC()
	if answered != 0 {
		r.Answered = time.Unix(0, answered).UTC()
	}
	return r, nil
}

// present is how r reads now: a pending approval past its expiry reads
// as expired, and one whose waiter (on this host) ended as withdrawn.
func (s *Store) present(r row) Approval {
	a := r.Approval
	if a.State != StatePending {
		return a
	}
	if now := s.now(); !now.Before(a.Expires) {
		a.State, a.Channel, a.By, a.Answered = StateExpired, kernel.ChannelTimeout, nobodyAnswered(a), a.Expires
		a.Note = "nobody answered before it expired"
	} else if r.host == s.host && !ProcessAlive(a.PID) {
		a.State, a.Note = StateWithdrawn, NoteWaiterEnded
	}
	return a
}

// nobodyAnswered is the By of an expired approval.
func nobodyAnswered(a Approval) string {
	return "nobody answered in " + a.Expires.Sub(a.Created).Round(time.Second).String()
}

func (s *Store) get(ctx context.Context, q queryer, id string) (row, error) {
	if !ValidID(id) {
		return row{}, fmt.Errorf("%w: %q is not an approval id (16 hex characters)", ErrNotFound, truncate(id, 40))
	}
	r, err := scanRow(q.QueryRowContext(ctx, `SELECT `+columns+` FROM approvals WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return row{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return row{}, fmt.Errorf("approvals: reading %s: %w", id, err)
	}
	return r, nil
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Get returns the approval id, as it reads now (see List).
func (s *Store) Get(ctx context.Context, id string) (Approval, error) {
	r, err := s.get(ctx, s.db, id)
	if err != nil {
		return Approval{}, err
	}
	return s.present(r), nil
}

// Nonce returns the approval's one-time nonce while it is pending: for
// the web page that answers it, nothing else.
func (s *Store) Nonce(ctx context.Context, id string) (string, error) {
	r, err := s.get(ctx, s.db, id)
	if err != nil {
		return "", err
	}
	if a := s.present(r); !a.Pending() {
		return "", notPending(a)
	}
	return r.nonce, nil
}

// ListOptions select approvals. Limit 0 means no limit.
type ListOptions struct {
	Pending bool   // only the pending ones
	Run     string // only the run's
	Limit   int
}

// List returns approvals, newest first, each as it reads now: a pending
// one past its expiry reads as expired, and one whose waiting process
// (on this machine) has ended reads as withdrawn.
func (s *Store) List(ctx context.Context, o ListOptions) ([]Approval, error) {
	q := `SELECT ` + columns + ` FROM approvals`
	var where []string
	var args []any
	if o.Pending {
		where = append(where, "state = ?")
		args = append(args, StatePending)
	}
	if o.Run != "" {
		where = append(where, "run = ?")
		args = append(args, o.Run)
	}
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY seq DESC"
	if o.Limit > 0 && !o.Pending {
		q += fmt.Sprintf(" LIMIT %d", o.Limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("approvals: listing: %w", err)
	}
	defer rows.Close()
	var out []Approval
	for rows.Next() {
		r, err := scanRow(rows)
		if err != nil {
			return nil, fmt.Errorf("approvals: listing: %w", err)
		}
		a := s.present(r)
		if o.Pending && !a.Pending() {
			continue
		}
		out = append(out, a)
		if o.Limit > 0 && len(out) == o.Limit {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("approvals: listing: %w", err)
	}
	return out, nil
}

// notPending is the error for answering a that is no longer pending: it
// says what became of it.
func notPending(a Approval) error {
	switch a.State {
	case StateApproved, StateRefused:
		return fmt.Errorf("%w: approval %s was already %s on channel %s by %s at %s", ErrNotPending, a.ID, a.State,
			a.Channel, a.By, a.Answered.Local().Format(time.DateTime))
	case StateExpired:
		return fmt.Errorf("%w: approval %s expired at %s (%s): it was refused", ErrNotPending, a.ID,
			a.Expires.Local().Format(time.DateTime), a.By)
	case StateWithdrawn:
		return fmt.Errorf("%w: approval %s was withdrawn: %s", ErrNotPending, a.ID, a.Note)
	}
	return fmt.Errorf("%w: approval %s is %s", ErrNotPending, a.ID, a.State)
}

// Answer answers the pending approval id, once: a compare-and-set on its
// state under the database's write lock, so of answers racing (from any
// processes) exactly one wins and the others get ErrNotPending, as does an
// answer to an approval expired or withdrawn. An answer on kernel.ChannelWeb
// must carry the approval's nonce (ErrNonce otherwise), which it consumes;
// other channels pass "".
func (s *Store) Answer(ctx context.Context, id string, ans kernel.Answer, nonce string) (Approval, error) {
	if ans.Channel == "" {
		return Approval{}, errors.New("approvals: an answer needs its channel")
	}
	tx, err := s.db.BeginTx(ctx, nil) // immediate: the write lock
	if err != nil {
		return Approval{}, fmt.Errorf("approvals: answering %s: %w", id, err)
	}
	defer tx.Rollback()
	r, err := s.get(ctx, tx, id)
	if err != nil {
		return Approval{}, err
	}
	a := s.present(r)
	if !a.Pending() {
		if r.State == StatePending { // expired or its waiter gone: say so in the file too
			if err := s.end(ctx, tx, a); err != nil {
				return Approval{}, err
			}
			if err := tx.Commit(); err != nil {
				return Approval{}, fmt.Errorf("approvals: answering %s: %w", id, err)
			}
		}
		return Approval{}, notPending(a)
	}
	if ans.Channel == kernel.ChannelWeb && (nonce == "" || subtle.ConstantTimeCompare([]byte(nonce), []byte(r.nonce)) != 1) {
		return Approval{}, fmt.Errorf("%w (approval %s)", ErrNonce, id)
	}
	a.State = StateRefused
	if ans.Yes {
		a.State = StateApproved
	}
	a.Answered, a.Channel, a.By = s.now().UTC(), ans.Channel, ans.By
	res, err := tx.ExecContext(ctx, `UPDATE approvals SET state = ?, nonce = '', answered = ?, channel = ?, by_whom = ?
		WHERE id = ? AND state = ?`, a.State, a.Answered.UnixNano(), a.Channel, a.By, id, StatePending)
	if err != nil {
		return Approval{}, fmt.Errorf("approvals: answering %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return Approval{}, fmt.Errorf("%w: approval %s was answered meanwhile", ErrNotPending, id)
	}
	if err := tx.Commit(); err != nil {
		return Approval{}, fmt.Errorf("approvals: answering %s: %w", id, err)
	}
	return a, nil
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// end records that pending approval a ended as a reads now (expired or
// withdrawn), if it is still pending in the file.
func (s *Store) end(ctx context.Context, x execer, a Approval) error {
	answered := a.Answered
	if answered.IsZero() {
		answered = s.now().UTC()
	}
	_, err := x.ExecContext(ctx, `UPDATE approvals SET state = ?, nonce = '', answered = ?, channel = ?, by_whom = ?, note = ?
		WHERE id = ? AND state = ?`, a.State, answered.UnixNano(), a.Channel, a.By, a.Note, a.ID, StatePending)
	if err != nil {
		return fmt.Errorf("approvals: ending %s: %w", a.ID, err)
	}
	return nil
}

// PollInterval is how often Wait looks at the file.
const PollInterval = 150 * time.Millisecond

// Wait returns the approval id once it is no longer pending: answered,
// withdrawn, or expired (which Wait records itself, as a refusal on
// kernel.ChannelTimeout, when its Expires passes). It looks at the file
// every PollInterval; ctx ends the wait.
func (s *Store) Wait(ctx context.Context, id string) (Approval, error) {
	t := time.NewTicker(PollInterval)
	defer t.Stop()
	for {
		r, err := s.get(ctx, s.db, id)
		if err != nil {
			return Approval{}, err
		}
		a := s.present(r)
		if a.State == StateExpired && r.State == StatePending {
			if err := s.end(ctx, s.db, a); err != nil {
				return Approval{}, err
			}
			// Answered meanwhile? The file says which came first.
			return s.Get(ctx, id)
		}
		if !a.Pending() {
			return a, nil
		}
		select {
		case <-ctx.Done():
			return Approval{}, ctx.Err()
		case <-t.C:
		}
	}
}

// Withdraw ends the pending approval id that nobody waits for any more
// (the call that asked ended), saying why. ErrNotPending when it was
// answered, expired or withdrawn before.
func (s *Store) Withdraw(ctx context.Context, id, why string) error {
	if !ValidID(id) {
		return fmt.Errorf("%w: %q is not an approval id", ErrNotFound, truncate(id, 40))
	}
	res, err := s.db.ExecContext(ctx, `UPDATE approvals SET state = ?, nonce = '', answered = ?, note = ?
		WHERE id = ? AND state = ?`, StateWithdrawn, s.now().UnixNano(), why, id, StatePending)
	if err != nil {
		return fmt.Errorf("approvals: withdrawing %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	a, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	return notPending(a)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
