package data

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mandatevm/mandate/internal/sqlitedb"
)

// Store limits. A record or import past one is an error, never truncated.
const (
	MaxNameLen         = 256     // collection, id, owner, relation, tag
	MaxFieldNameLen    = 128     // a field name
	MaxFieldsPerRec    = 256     // fields of one record
	MaxTagsPerField    = 32      // labels of one field
	MaxRecordBytes     = 1 << 20 // a record's fields as JSON
	MaxImportRecords   = 1 << 20 // records in one import
	schemaVersion      = 1
	storeApplicationID = 0x4d4e4454 // "MNDT"
)

// Record is one record of a collection: an id (unique within the
// collection), an owner (a principal id), fields (JSON values by name) and
// the confidentiality labels of each field.
type Record struct {
	ID     string                     `json:"id"`
	Owner  string                     `json:"owner"`
	Fields map[string]json.RawMessage `json:"fields"`
	// Labels maps a field to its confidentiality tags, e.g.
	// "passport": ["pii:$owner"]. "$owner" is replaced by the record's
	// owner when it is imported.
	Labels map[string][]string `json:"labels,omitempty"`
}

// Relation is one edge of the principals' relations: Subject is Relation
// of Object, e.g. {"carol", "manager_of", "alice"}.
type Relation struct {
	Subject  string `json:"subject"`
	Relation string `json:"relation"`
	Object   string `json:"object"`
}

// ImportOptions tune Import.
type ImportOptions struct {
	// Relations maps a field name to a relation name. For each imported
	// record whose field F is a string S (or an array of strings), the
	// relation (S, Relations[F], record owner) is recorded: importing a
	// "people" collection with Relations {"manager": "manager_of"} makes
	// each person's manager manager_of them. Relations derived from a
	// record are replaced when the record is re-imported.
	Relations map[string]string
}

// Store is an embedded SQLite database of records and relations, the
// default Backend. It is safe for concurrent use; every method honours its
// context.
type Store struct {
	db   *sql.DB
	path string
}

const schema = `
CREATE TABLE records (
	collection TEXT NOT NULL,
	id         TEXT NOT NULL,
	owner      TEXT NOT NULL,
	fields     TEXT NOT NULL, -- JSON object: field -> value
	labels     TEXT NOT NULL, -- JSON object: field -> [tag...]
	PRIMARY KEY (collection, id)
) WITHOUT ROWID;
CREATE INDEX records_owner ON records (collection, owner);
CREATE TABLE relations (
	subject        TEXT NOT NULL,
	relation       TEXT NOT NULL,
	object         TEXT NOT NULL,
	src_collection TEXT NOT NULL, -- the record it was derived from
	src_id         TEXT NOT NULL,
	PRIMARY KEY (subject, relation, object, src_collection, src_id)
) WITHOUT ROWID;
CREATE INDEX relations_src ON relations (src_collection, src_id);
`

// Open opens (creating if needed) the store at path: WAL journal, a busy
// timeout, the schema created or checked. A file that is not a SQLite
// database, or a SQLite database that is not a Mandate data store, is a
// clear error.
func Open(path string) (*Store, error) {
	db, err := sqlitedb.Open(path, sqlitedb.Config{
		What: "data store", AppID: storeApplicationID, Version: schemaVersion, Schema: schema,
		Pragmas: []string{"foreign_keys(1)", "synchronous(NORMAL)"},
	})
	if err != nil {
		return nil, err
	}
	return &Store{db: db, path: path}, nil
}

// Path returns the file the store was opened from.
func (s *Store) Path() string { return s.path }

// Location returns the file the store was opened from.
func (s *Store) Location() string { return s.path }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// validName checks a collection, id, owner, relation or tag: non-empty,
// at most MaxNameLen bytes, valid UTF-8, no control or space characters.
func validName(s string, max int) error {
	if s == "" {
		return errors.New("empty")
	}
	if len(s) > max {
		return fmt.Errorf("longer than %d bytes", max)
	}
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return fmt.Errorf("%q has a space or control character", s)
		}
	}
	return nil
}

// validFieldName also refuses "*", which scopes use for "every field".
func validFieldName(f string) error {
	if f == "*" {
		return errors.New(`"*" is not a field name`)
	}
	return validName(f, MaxFieldNameLen)
}

// canonValue returns the canonical JSON of a value (objects with sorted
// keys, no insignificant space), so values compare by their bytes.
func canonValue(v json.RawMessage) (json.RawMessage, error) {
	if len(v) == 0 {
		return nil, errors.New("missing value")
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data")
	}
	return json.Marshal(x)
}

// normalize validates r and returns it canonical: values canonical JSON,
// "$owner" substituted in labels, tags sorted and deduplicated.
func normalize(r Record) (Record, error) {
	if err := validName(r.ID, MaxNameLen); err != nil {
		return Record{}, fmt.Errorf("id: %v", err)
	}
	if err := validName(r.Owner, MaxNameLen); err != nil {
		return Record{}, fmt.Errorf("owner: %v", err)
	}
	if len(r.Fields) > MaxFieldsPerRec {
		return Record{}, fmt.Errorf("%d fields (max %d)", len(r.Fields), MaxFieldsPerRec)
	}
	out := Record{ID: r.ID, Owner: r.Owner, Fields: make(map[string]json.RawMessage, len(r.Fields)), Labels: map[string][]string{}}
	size := 0
	for f, v := range r.Fields {
		if err := validFieldName(f); err != nil {
			return Record{}, fmt.Errorf("field name: %v", err)
		}
		c, err := canonValue(v)
		if err != nil {
			return Record{}, fmt.Errorf("field %s: %v", f, err)
		}
		size += len(f) + len(c)
		out.Fields[f] = c
	}
	if size > MaxRecordBytes {
		return Record{}, fmt.Errorf("fields of %d bytes (max %d)", size, MaxRecordBytes)
	}
	for f, tags := range r.Labels {
		if _, ok := out.Fields[f]; !ok {
			return Record{}, fmt.Errorf("labels for field %q, which the record does not have", f)
		}
		if len(tags) > MaxTagsPerField {
			return Record{}, fmt.Errorf("field %s: %d labels (max %d)", f, len(tags), MaxTagsPerField)
		}
		ts := make([]string, 0, len(tags))
		for _, t := range tags {
			t = strings.ReplaceAll(t, "$owner", r.Owner)
			if err := validName(t, MaxNameLen); err != nil {
				return Record{}, fmt.Errorf("field %s: label: %v", f, err)
			}
			ts = append(ts, t)
		}
		slices.Sort(ts)
		if ts = slices.Compact(ts); len(ts) > 0 {
			out.Labels[f] = ts
		}
	}
	return out, nil
}

// Import stores records in collection in one transaction: either every
// record is stored or, on any error, none is. A record with the id of one
// already in the collection replaces it; two records with the same id in
// one import are an error. Errors name the record's index (0-based).
// It returns how many records were stored.
func (s *Store) Import(ctx context.Context, collection string, records []Record, opts ImportOptions) (int, error) {
	plan, err := PlanImport(collection, records, opts)
	if err != nil {
		return 0, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	for _, r := range plan.Records {
		if _, err := tx.ExecContext(ctx, `INSERT INTO records (collection, id, owner, fields, labels) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (collection, id) DO UPDATE SET owner = excluded.owner, fields = excluded.fields, labels = excluded.labels`,
			collection, r.Record.ID, r.Record.Owner, r.Fields, r.Labels); err != nil {
			return 0, fmt.Errorf("record %d: %w", r.Index, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM relations WHERE src_collection = ? AND src_id = ?`, collection, r.Record.ID); err != nil {
			return 0, fmt.Errorf("record %d: %w", r.Index, err)
		}
		for _, e := range r.Edges {
			if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO relations (subject, relation, object, src_collection, src_id) VALUES (?, ?, ?, ?, ?)`,
				e.Subject, e.Relation, e.Object, collection, r.Record.ID); err != nil {
				return 0, fmt.Errorf("record %d: %w", r.Index, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return len(plan.Records), nil
}

// relationSubjects reads a relation field: a string, or an array of
// strings; the empty string and null name nobody.
func relationSubjects(v json.RawMessage) ([]string, error) {
	var one string
	if err := json.Unmarshal(v, &one); err == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, validName(one, MaxNameLen)
	}
	if string(v) == "null" {
		return nil, nil
	}
	var many []string
	if err := json.Unmarshal(v, &many); err != nil {
		return nil, errors.New("want a principal id or a list of them")
	}
	for _, m := range many {
		if err := validName(m, MaxNameLen); err != nil {
			return nil, err
		}
	}
	return many, nil
}

// AddRelations records relations directly (not derived from a record), in
// one transaction.
func (s *Store) AddRelations(ctx context.Context, rels []Relation) error {
	if err := CheckRelations(rels); err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, r := range rels {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO relations (subject, relation, object, src_collection, src_id) VALUES (?, ?, ?, '', '')`,
			r.Subject, r.Relation, r.Object); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// querier is what both *sql.DB and *sql.Tx offer.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// sqlReader reads through a *sql.DB or, in Update, its *sql.Tx.
type sqlReader struct{ q querier }

func (r sqlReader) Get(ctx context.Context, collection, id string) (Record, bool, error) {
	return getRecord(ctx, r.q, collection, id)
}

func (r sqlReader) Owned(ctx context.Context, collection, owner string) ([]Record, error) {
	return ownedRecords(ctx, r.q, collection, owner)
}

func (r sqlReader) Related(ctx context.Context, subject, relation string) ([]string, error) {
	return related(ctx, r.q, subject, relation)
}

// Get returns the record collection/id, or ok false.
func (s *Store) Get(ctx context.Context, collection, id string) (Record, bool, error) {
	return getRecord(ctx, s.db, collection, id)
}

func getRecord(ctx context.Context, q querier, collection, id string) (Record, bool, error) {
	var owner, fields, labels string
	err := q.QueryRowContext(ctx, `SELECT owner, fields, labels FROM records WHERE collection = ? AND id = ?`, collection, id).Scan(&owner, &fields, &labels)
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, err
	}
	r, err := decodeRecord(id, owner, fields, labels)
	return r, err == nil, err
}

func decodeRecord(id, owner, fields, labels string) (Record, error) {
	r := Record{ID: id, Owner: owner}
	if err := json.Unmarshal([]byte(fields), &r.Fields); err != nil {
		return Record{}, fmt.Errorf("record %s: corrupted fields: %w", id, err)
	}
	if err := json.Unmarshal([]byte(labels), &r.Labels); err != nil {
		return Record{}, fmt.Errorf("record %s: corrupted labels: %w", id, err)
	}
	if r.Fields == nil {
		r.Fields = map[string]json.RawMessage{}
	}
	return r, nil
}

// Records returns every record of collection, sorted by id.
func (s *Store) Records(ctx context.Context, collection string) ([]Record, error) {
	return selectRecords(ctx, s.db, `SELECT id, owner, fields, labels FROM records WHERE collection = ? ORDER BY id`, collection)
}

// Owned returns the records of collection whose owner is owner, sorted by
// id.
func (s *Store) Owned(ctx context.Context, collection, owner string) ([]Record, error) {
	return ownedRecords(ctx, s.db, collection, owner)
}

func ownedRecords(ctx context.Context, q querier, collection, owner string) ([]Record, error) {
	return selectRecords(ctx, q, `SELECT id, owner, fields, labels FROM records WHERE collection = ? AND owner = ? ORDER BY id`, collection, owner)
}

func selectRecords(ctx context.Context, q querier, query string, args ...any) ([]Record, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		var id, owner, fields, labels string
		if err := rows.Scan(&id, &owner, &fields, &labels); err != nil {
			return nil, err
		}
		r, err := decodeRecord(id, owner, fields, labels)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Related returns the objects subject is relation of, sorted.
func (s *Store) Related(ctx context.Context, subject, relation string) ([]string, error) {
	return related(ctx, s.db, subject, relation)
}

func related(ctx context.Context, q querier, subject, relation string) ([]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT DISTINCT object FROM relations WHERE subject = ? AND relation = ? ORDER BY object`, subject, relation)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// Update runs fn on the record collection/id inside one write
// transaction (SQLite's, taken at once: writers are serialized) and stores
// what fn leaves in the record's fields when it returns nil; see
// Backend.Update.
func (s *Store) Update(ctx context.Context, collection, id string, fn func(tx Reader, r *Record, ok bool) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	r, ok, err := getRecord(ctx, tx, collection, id)
	if err != nil {
		return err
	}
	if err := fn(sqlReader{tx}, &r, ok); err != nil {
		return err
	}
	fields, err := EncodeFields(r.Fields)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE records SET fields = ? WHERE collection = ? AND id = ?`, fields, collection, id); err != nil {
		return err
	}
	return tx.Commit()
}
