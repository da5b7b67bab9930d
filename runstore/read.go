package runstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Summary is one line of List.
type Summary struct {
	Run
	Tasks, Caps, Denials int
}

// List returns every run, newest first.
func (s *Store) List(ctx context.Context) ([]Summary, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+runColumns+`,
		(SELECT count(*) FROM tasks WHERE tasks.run = runs.id),
		(SELECT count(*) FROM caps WHERE caps.run = runs.id),
		(SELECT coalesce(sum(denials), 0) FROM tasks WHERE tasks.run = runs.id)
		FROM runs ORDER BY started DESC, seq DESC`)
	if err != nil {
		return nil, s.errorf("%v", err)
	}
	defer rows.Close()
	var out []Summary
	for rows.Next() {
		var sum Summary
		var dd, fd int
		row := &runRow{r: &sum.Run, dd: &dd, fd: &fd}
		if err := rows.Scan(append(row.dest(), &sum.Tasks, &sum.Caps, &sum.Denials)...); err != nil {
			return nil, s.errorf("corrupted run row: %v", err)
		}
		if err := row.parse(); err != nil {
			return nil, s.errorf("run %s: %v", sum.ID, err)
		}
		sum.State = s.reportState(sum.ID, sum.State)
		out = append(out, sum)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf("%v", err)
	}
	return out, nil
}

const runColumns = `id, manifest, task, module, digest, principal, engine, started, coalesce(ended, ''), coalesce(exit, -1), state, error, denials_dropped, flows_dropped`

// runRow scans a row of runColumns into a Run.
type runRow struct {
	r              *Run
	started, ended string
	dd, fd         *int
}

func (x *runRow) dest() []any {
	r := x.r
	return []any{&r.ID, &r.Manifest, &r.Task, &r.Module, &r.Digest, &r.Principal, &r.Engine,
		&x.started, &x.ended, &r.Exit, &r.State, &r.Error, x.dd, x.fd}
}

// parse sets the run's times from their text.
func (x *runRow) parse() error {
	var err error
	if x.r.Started, err = parseTime(x.started); err != nil {
		return fmt.Errorf("start time: %v", err)
	}
	if x.ended != "" {
		if x.r.Ended, err = parseTime(x.ended); err != nil {
			return fmt.Errorf("end time: %v", err)
		}
	}
	return nil
}

// Last returns the id of the most recently started run.
func (s *Store) Last(ctx context.Context) (string, error) {
	var id string
	// The last run that ran: a refused run (nothing ran) is the last only
	// when no run ran at all.
	err := s.db.QueryRowContext(ctx, "SELECT id FROM runs ORDER BY state = ?, started DESC, seq DESC LIMIT 1", StateRefused).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("%w in %s", ErrNoRuns, s.dir)
	}
	if err != nil {
		return "", s.errorf("%v", err)
	}
	return id, nil
}

// Get returns the record of run id, or of the last run that ran (Last)
// when id is empty.
// Every failure is a readable error naming the store.
func (s *Store) Get(ctx context.Context, id string) (*Record, error) {
	if id == "" {
		var err error
		if id, err = s.Last(ctx); err != nil {
			return nil, err
		}
	} else if !ValidRunID(id) {
		return nil, fmt.Errorf("%q is not a run id (run ids look like 20261129T153000Z-ab12cd)", truncate(id, 64))
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, s.errorf("%v", err)
	}
	defer tx.Rollback()
	rec := &Record{Version: RecordVersion, Graph: kernel.Graph{Tasks: []kernel.GraphTask{}, Caps: []kernel.GraphCap{}},
		Denials: []Denial{}, Flows: []Flow{}, Approvals: []Approval{}, Effects: []Effect{}}
	row := &runRow{r: &rec.Run, dd: &rec.DenialsDropped, fd: &rec.FlowsDropped}
	err = tx.QueryRowContext(ctx, "SELECT "+runColumns+" FROM runs WHERE id = ?", id).Scan(row.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound(fmt.Sprintf("no run %s recorded in %s", id, s.dir))
	}
	if err != nil {
		return nil, s.errorf("run %s: %v", id, err)
	}
	if err := row.parse(); err != nil {
		return nil, s.errorf("run %s is corrupted: %v", id, err)
	}
	rec.Run.State = s.reportState(id, rec.Run.State)
	if err := readTasks(ctx, tx, rec); err != nil {
		return nil, s.errorf("run %s is corrupted: %v", id, err)
	}
	if err := readCaps(ctx, tx, rec); err != nil {
		return nil, s.errorf("run %s is corrupted: %v", id, err)
	}
	if err := readDenials(ctx, tx, rec); err != nil {
		return nil, s.errorf("run %s is corrupted: %v", id, err)
	}
	if err := readFlows(ctx, tx, rec); err != nil {
		return nil, s.errorf("run %s is corrupted: %v", id, err)
	}
	if err := readApprovals(ctx, tx, rec); err != nil {
		return nil, s.errorf("run %s is corrupted: %v", id, err)
	}
	if err := readEffects(ctx, tx, rec); err != nil {
		return nil, s.errorf("run %s is corrupted: %v", id, err)
	}
	return rec, nil
}

func readTasks(ctx context.Context, tx *sql.Tx, rec *Record) error {
	rows, err := tx.QueryContext(ctx, `SELECT id, parent, principal, module, state, label, clearance, denials, error
		FROM tasks WHERE run = ? ORDER BY ord`, rec.Run.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var t kernel.GraphTask
		var state, label string
		var clearance sql.NullString
		if err := rows.Scan(&t.ID, &t.Parent, &t.Principal, &t.Module, &state, &label, &clearance, &t.Denials, &t.Error); err != nil {
			return err
		}
		t.State = kernel.TaskState(state)
		if err := json.Unmarshal([]byte(label), &t.Label); err != nil {
			return fmt.Errorf("task %s: label: %v", t.ID, err)
		}
		if clearance.Valid {
			t.Clearance = new(kindapi.Label)
			if err := json.Unmarshal([]byte(clearance.String), t.Clearance); err != nil {
				return fmt.Errorf("task %s: clearance: %v", t.ID, err)
			}
		}
		if t.ID == "" {
			return errors.New("a task has no id")
		}
		rec.Tasks = append(rec.Tasks, t)
	}
	return rows.Err()
}

func readCaps(ctx context.Context, tx *sql.Tx, rec *Record) error {
	rows, err := tx.QueryContext(ctx, `SELECT id, kind, name, holder, parent, scope, revoked, dropped, audited, when_exprs, approve_when, rate, view
		FROM caps WHERE run = ? ORDER BY ord`, rec.Run.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var c kernel.GraphCap
		var scope, when, appr, view string
		if err := rows.Scan(&c.ID, &c.Kind, &c.Name, &c.Holder, &c.Parent, &scope, &c.Revoked, &c.Dropped, &c.Audited, &when, &appr, &c.Rate, &view); err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(view), &c.View); err != nil {
			return fmt.Errorf("cap %s: view: %v", c.ID, err)
		}
		if !json.Valid([]byte(scope)) {
			return fmt.Errorf("cap %s: the scope is not JSON", c.ID)
		}
		c.Scope = json.RawMessage(scope)
		if err := json.Unmarshal([]byte(when), &c.When); err != nil {
			return fmt.Errorf("cap %s: when: %v", c.ID, err)
		}
		if err := json.Unmarshal([]byte(appr), &c.ApproveWhen); err != nil {
			return fmt.Errorf("cap %s: approve_when: %v", c.ID, err)
		}
		if len(c.When) == 0 {
			c.When = nil
		}
		if len(c.ApproveWhen) == 0 {
			c.ApproveWhen = nil
		}
		if c.ID == "" {
			return errors.New("a capability has no id")
		}
		rec.Caps = append(rec.Caps, c)
	}
	return rows.Err()
}

func readDenials(ctx context.Context, tx *sql.Tx, rec *Record) error {
	rows, err := tx.QueryContext(ctx, `SELECT time, task, principal, cap, kind, op, errno, reason, label
		FROM denials WHERE run = ? ORDER BY seq`, rec.Run.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var d Denial
		var tm, label string
		if err := rows.Scan(&tm, &d.Task, &d.Principal, &d.Cap, &d.Kind, &d.Op, &d.Errno, &d.Reason, &label); err != nil {
			return err
		}
		if d.Time, err = parseTime(tm); err != nil {
			return fmt.Errorf("denial time: %v", err)
		}
		if err := json.Unmarshal([]byte(label), &d.Label); err != nil {
			return fmt.Errorf("denial label: %v", err)
		}
		rec.Denials = append(rec.Denials, d)
	}
	return rows.Err()
}

func readFlows(ctx context.Context, tx *sql.Tx, rec *Record) error {
	rows, err := tx.QueryContext(ctx, `SELECT time, task, cap, kind, op, decision, errno, label
		FROM flows WHERE run = ? ORDER BY seq`, rec.Run.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var f Flow
		var tm, label string
		if err := rows.Scan(&tm, &f.Task, &f.Cap, &f.Kind, &f.Op, &f.Decision, &f.Errno, &label); err != nil {
			return err
		}
		if f.Time, err = parseTime(tm); err != nil {
			return fmt.Errorf("flow time: %v", err)
		}
		if err := json.Unmarshal([]byte(label), &f.Label); err != nil {
			return fmt.Errorf("flow label: %v", err)
		}
		rec.Flows = append(rec.Flows, f)
	}
	return rows.Err()
}

func readApprovals(ctx context.Context, tx *sql.Tx, rec *Record) error {
	rows, err := tx.QueryContext(ctx, `SELECT time, task, cap, kind, op, summary, digest, answer, channel, by
		FROM approvals WHERE run = ? ORDER BY seq`, rec.Run.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var a Approval
		var tm string
		if err := rows.Scan(&tm, &a.Task, &a.Cap, &a.Kind, &a.Op, &a.Summary, &a.Digest, &a.Answer, &a.Channel, &a.By); err != nil {
			return err
		}
		if a.Time, err = parseTime(tm); err != nil {
			return fmt.Errorf("approval time: %v", err)
		}
		rec.Approvals = append(rec.Approvals, a)
	}
	return rows.Err()
}

func readEffects(ctx context.Context, tx *sql.Tx, rec *Record) error {
	if err := tx.QueryRowContext(ctx, "SELECT effects_dropped FROM runs WHERE id = ?", rec.Run.ID).Scan(&rec.EffectsDropped); err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, `SELECT time, task, cap, kind, op, summary, outcome, errno
		FROM effects WHERE run = ? ORDER BY seq`, rec.Run.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var e Effect
		var tm string
		if err := rows.Scan(&tm, &e.Task, &e.Cap, &e.Kind, &e.Op, &e.Summary, &e.Outcome, &e.Errno); err != nil {
			return err
		}
		if e.Time, err = parseTime(tm); err != nil {
			return fmt.Errorf("effect time: %v", err)
		}
		rec.Effects = append(rec.Effects, e)
	}
	return rows.Err()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// notFound is an error that is ErrNotFound.
type notFound string

func (e notFound) Error() string        { return string(e) }
func (e notFound) Is(target error) bool { return target == ErrNotFound }

// Outputs returns what the tasks of run id left (results, kept stdout and
// stderr), in task order, streams in the order result, stdout, stderr;
// only task's when task is not empty. The last run that ran when id is
// empty. A run that recorded no outputs (it crashed, or was recorded by
// an earlier Mandate) has none: an empty list, not an error.
func (s *Store) Outputs(ctx context.Context, id, task string) ([]Output, error) {
	if id == "" {
		var err error
		if id, err = s.Last(ctx); err != nil {
			return nil, err
		}
	} else if !ValidRunID(id) {
		return nil, fmt.Errorf("%q is not a run id (run ids look like 20261129T153000Z-ab12cd)", truncate(id, 64))
	}
	var n int
	if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM runs WHERE id = ?", id).Scan(&n); err != nil {
		return nil, s.errorf("run %s: %v", id, err)
	}
	if n == 0 {
		return nil, notFound(fmt.Sprintf("no run %s recorded in %s", id, s.dir))
	}
	rows, err := s.db.QueryContext(ctx, `SELECT outputs.task, stream, data, truncated, dropped, withheld FROM outputs
		LEFT JOIN tasks ON tasks.run = outputs.run AND tasks.id = outputs.task
		WHERE outputs.run = ? AND (? = '' OR outputs.task = ?)
		ORDER BY coalesce(tasks.ord, 1 << 62), outputs.task,
			CASE stream WHEN 'result' THEN 0 WHEN 'stdout' THEN 1 ELSE 2 END`, id, task, task)
	if err != nil {
		return nil, s.errorf("run %s: %v", id, err)
	}
	defer rows.Close()
	out := []Output{}
	for rows.Next() {
		var o Output
		if err := rows.Scan(&o.Task, &o.Stream, &o.Data, &o.Truncated, &o.Dropped, &o.Withheld); err != nil {
			return nil, s.errorf("run %s is corrupted: %v", id, err)
		}
		if o.Data == nil {
			o.Data = []byte{}
		}
		o.Size = int64(len(o.Data)) + o.Dropped
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf("run %s: %v", id, err)
	}
	return out, nil
}
