// Package pgstore is the data kind's PostgreSQL backend: the records and
// relations of caps/data in a PostgreSQL database that a fleet of Mandate
// nodes shares, where the embedded SQLite store (data.Open) serves one.
//
//	st, err := pgstore.Open(ctx, "postgres://mandate@db.internal/mandate")
//	if err != nil {
//		return err
//	}
//	defer st.Close()
//	kind := data.New(st)
//
// It validates with caps/data's own code (data.PlanImport,
// data.CheckRelations) and passes the same conformance suite
// (caps/data/datatest) as the SQLite store. Open creates the schema in an
// empty database (its current schema, the first of the search_path) or
// checks it, under an advisory lock so that nodes starting together
// create it once; a database with other tables, or with a data store of
// another schema version, is an error and is left as it was.
//
// Writes are transactions at READ COMMITTED: Update locks the record
// (SELECT ... FOR UPDATE) for its read-modify-write, so that no update
// is lost, and Import upserts rows in id order. A transaction that fails
// on a serialization failure or a deadlock is retried, at most
// maxAttempts times. Text columns use the "C" collation: ids sort bytewise,
// as in SQLite and Go.
//
// Connections come from a pgxpool.Pool: pgx's own interface rather than
// database/sql, for PostgreSQL's error codes (which a retry must see),
// batches for large imports, and a pool configured from the URL
// (pool_max_conns=...). The URL is pgx's: libpq's keywords and PG*
// environment variables (PGPASSWORD, PGPASSFILE) apply, so a password
// need not be in it; messages never show it (Redact).
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"github.com/mandatevm/mandate/caps/data/pgstore/pgurl"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mandatevm/mandate/caps/data"
)

// schemaVersion is the version of the tables below; mandate_store says
// which a database holds.
const schemaVersion = 1

// schema is the data store's tables, created in an empty database. It
// mirrors caps/data's SQLite schema.
const schema = `
CREATE TABLE mandate_store (
	kind    text PRIMARY KEY,
	version integer NOT NULL
);
CREATE TABLE records (
	collection text COLLATE "C" NOT NULL,
	id         text COLLATE "C" NOT NULL,
	owner      text COLLATE "C" NOT NULL,
	fields     text NOT NULL, -- JSON object: field -> value
	labels     text NOT NULL, -- JSON object: field -> [tag...]
	PRIMARY KEY (collection, id)
);
CREATE INDEX records_owner ON records (collection, owner);
CREATE TABLE relations (
	subject        text COLLATE "C" NOT NULL,
	relation       text COLLATE "C" NOT NULL,
	object         text COLLATE "C" NOT NULL,
	src_collection text COLLATE "C" NOT NULL, -- the record it was derived from
	src_id         text COLLATE "C" NOT NULL,
	PRIMARY KEY (subject, relation, object, src_collection, src_id)
);
CREATE INDEX relations_src ON relations (src_collection, src_id);
`

// storeKind is this store's row in mandate_store.
const storeKind = "data"

// lockKey is the advisory lock taken while the schema is checked or
// created: "MNDT", as the SQLite store's application id.
const lockKey = 0x4d4e4454

// maxAttempts bounds the runs of one transaction that fails on a
// serialization failure or a deadlock.
const maxAttempts = 10

// importBatch is how many records an import sends in one round trip.
const importBatch = 256

// Store is a data store in a PostgreSQL database. It is safe for
// concurrent use, by many goroutines and many processes.
type Store struct {
	pool  *pgxpool.Pool
	where string // the URL without its password
}

var _ data.Backend = (*Store)(nil)

// IsURL reports whether s names a PostgreSQL database (postgres:// or
// postgresql://) rather than a SQLite file.
func IsURL(s string) bool { return pgurl.IsURL(s) }

// Redact returns the URL s without its password (in the user info or a
// password= parameter), for messages.
func Redact(s string) string { return pgurl.Redact(s) }

// Open connects to the database at url (a postgres:// URL) and creates or
// checks the data store's schema there. ctx bounds the connection and the
// check, not the store's later use.
func Open(ctx context.Context, url string) (*Store, error) {
	where := Redact(url)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's message redacts the password itself.
		return nil, fmt.Errorf("data store %s: %w", where, err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("data store %s: %w", where, err)
	}
	s := &Store{pool: pool, where: where}
	if err := s.initSchema(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("data store %s: %w", where, err)
	}
	return s, nil
}

// initSchema creates the schema in an empty database, or checks the
// version of the one there. It alters nothing else.
func (s *Store) initSchema(ctx context.Context) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(lockKey)); err != nil {
			return err
		}
		var current *string
		if err := tx.QueryRow(ctx, `SELECT current_schema()`).Scan(&current); err != nil {
			return err
		}
		if current == nil {
			return errors.New("no schema to hold the data store: the search_path names none that exists")
		}
		rows, err := tx.Query(ctx, `SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = $1 ORDER BY tablename`, *current)
		if err != nil {
			return err
		}
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if len(tables) == 0 {
			if _, err := tx.Exec(ctx, schema); err != nil {
				return fmt.Errorf("creating the schema in %s: %w", *current, err)
			}
			_, err := tx.Exec(ctx, `INSERT INTO mandate_store (kind, version) VALUES ($1, $2)`, storeKind, schemaVersion)
			return err
		}
		if !slices.Contains(tables, "mandate_store") {
			if len(tables) > 5 {
				tables = append(tables[:5], "...")
			}
			return fmt.Errorf("not a Mandate data store (a PostgreSQL database whose schema %s has other tables: %s)", *current, strings.Join(tables, ", "))
		}
		var version int
		err = tx.QueryRow(ctx, `SELECT version FROM mandate_store WHERE kind = $1`, storeKind).Scan(&version)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("not a Mandate data store (schema %s holds a Mandate store of another kind)", *current)
		}
		if err != nil {
			return err
		}
		switch {
		case version == schemaVersion:
			return nil
		case version > schemaVersion:
			return fmt.Errorf("written by a newer Mandate (schema version %d, this one knows %d)", version, schemaVersion)
		}
		return fmt.Errorf("unknown schema version %d", version)
	})
}

// Location returns the database's URL without its password.
func (s *Store) Location() string { return s.where }

// Close closes every connection of the pool.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// inTx runs fn in a transaction, again (at most maxAttempts times in all)
// when it fails on a serialization failure or a deadlock. fn's own errors
// are returned as they are.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, fn)
		if err == nil || !retryable(err) {
			return err
		}
		if attempt == maxAttempts {
			return fmt.Errorf("data store: gave up after %d attempts: %w", attempt, err)
		}
		// A short random pause, growing with the attempts, so that the
		// transactions that collided do not collide again.
		pause := time.Duration(rand.Int64N(int64(attempt)*int64(5*time.Millisecond))) + time.Millisecond
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
	}
}

// retryable reports a serialization failure or a deadlock: the
// transaction was rolled back and may succeed when run again.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// querier is what both the pool and a transaction offer.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// reader reads through the pool or, in Update, its transaction.
type reader struct{ q querier }

func (r reader) Get(ctx context.Context, collection, id string) (data.Record, bool, error) {
	if !storable(collection, id) {
		return data.Record{}, false, ctx.Err()
	}
	return getRecord(ctx, r.q, `SELECT owner, fields, labels FROM records WHERE collection = $1 AND id = $2`, collection, id)
}

func (r reader) Owned(ctx context.Context, collection, owner string) ([]data.Record, error) {
	if !storable(collection, owner) {
		return nil, ctx.Err()
	}
	return selectRecords(ctx, r.q, `SELECT id, owner, fields, labels FROM records WHERE collection = $1 AND owner = $2 ORDER BY id`, collection, owner)
}

func (r reader) Related(ctx context.Context, subject, relation string) ([]string, error) {
	if !storable(subject, relation) {
		return nil, ctx.Err()
	}
	rows, err := r.q.Query(ctx, `SELECT DISTINCT object FROM relations WHERE subject = $1 AND relation = $2 ORDER BY object`, subject, relation)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if len(out) == 0 {
		out = nil
	}
	return out, err
}

// storable reports whether PostgreSQL can hold every one of ss as text:
// valid UTF-8 without a NUL. One it cannot names no record (validation
// refuses it on import), so a read with it finds nothing, as in SQLite,
// rather than failing.
func storable(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			return false
		}
	}
	return true
}

func getRecord(ctx context.Context, q querier, query, collection, id string) (data.Record, bool, error) {
	var owner, fields, labels string
	err := q.QueryRow(ctx, query, collection, id).Scan(&owner, &fields, &labels)
	if errors.Is(err, pgx.ErrNoRows) {
		return data.Record{}, false, nil
	}
	if err != nil {
		return data.Record{}, false, err
	}
	r, err := data.DecodeRecord(id, owner, fields, labels)
	return r, err == nil, err
}

func selectRecords(ctx context.Context, q querier, query string, args ...any) ([]data.Record, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []data.Record
	for rows.Next() {
		var id, owner, fields, labels string
		if err := rows.Scan(&id, &owner, &fields, &labels); err != nil {
			return nil, err
		}
		r, err := data.DecodeRecord(id, owner, fields, labels)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Get returns the record collection/id, or ok false.
func (s *Store) Get(ctx context.Context, collection, id string) (data.Record, bool, error) {
	return reader{s.pool}.Get(ctx, collection, id)
}

// Owned returns the records of collection whose owner is owner, sorted by
// id.
func (s *Store) Owned(ctx context.Context, collection, owner string) ([]data.Record, error) {
	return reader{s.pool}.Owned(ctx, collection, owner)
}

// Related returns the objects subject is relation of, sorted.
func (s *Store) Related(ctx context.Context, subject, relation string) ([]string, error) {
	return reader{s.pool}.Related(ctx, subject, relation)
}

// Records returns every record of collection, sorted by id.
func (s *Store) Records(ctx context.Context, collection string) ([]data.Record, error) {
	if !storable(collection) {
		return nil, ctx.Err()
	}
	return selectRecords(ctx, s.pool, `SELECT id, owner, fields, labels FROM records WHERE collection = $1 ORDER BY id`, collection)
}

// Import stores records in collection in one transaction, as
// data.Store.Import does: all of them or, on any error, none.
func (s *Store) Import(ctx context.Context, collection string, records []data.Record, opts data.ImportOptions) (int, error) {
	plan, err := data.PlanImport(collection, records, opts)
	if err != nil {
		return 0, err
	}
	// Rows are written in id order, so that two imports of the same
	// records lock them in the same order (no deadlock between them).
	order := make([]*data.PlannedRecord, len(plan.Records))
	for i := range plan.Records {
		order[i] = &plan.Records[i]
	}
	slices.SortFunc(order, func(a, b *data.PlannedRecord) int { return strings.Compare(a.Record.ID, b.Record.ID) })
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		for start := 0; start < len(order); start += importBatch {
			chunk := order[start:min(start+importBatch, len(order))]
			b := &pgx.Batch{}
			var owner []int // the record index of each queued statement
			for _, r := range chunk {
				b.Queue(`INSERT INTO records (collection, id, owner, fields, labels) VALUES ($1, $2, $3, $4, $5)
					ON CONFLICT (collection, id) DO UPDATE SET owner = excluded.owner, fields = excluded.fields, labels = excluded.labels`,
					collection, r.Record.ID, r.Record.Owner, r.Fields, r.Labels)
				b.Queue(`DELETE FROM relations WHERE src_collection = $1 AND src_id = $2`, collection, r.Record.ID)
				owner = append(owner, r.Index, r.Index)
				for _, e := range r.Edges {
					b.Queue(`INSERT INTO relations (subject, relation, object, src_collection, src_id) VALUES ($1, $2, $3, $4, $5)
						ON CONFLICT DO NOTHING`, e.Subject, e.Relation, e.Object, collection, r.Record.ID)
					owner = append(owner, r.Index)
				}
			}
			if err := sendBatch(ctx, tx, b, func(i int, err error) error {
				return fmt.Errorf("record %d: %w", owner[i], err)
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(plan.Records), nil
}

// sendBatch runs b in tx; the error of its statement i is described by
// what(i, err).
func sendBatch(ctx context.Context, tx pgx.Tx, b *pgx.Batch, what func(i int, err error) error) error {
	br := tx.SendBatch(ctx, b)
	for i := range b.Len() {
		if _, err := br.Exec(); err != nil {
			br.Close()
			if retryable(err) {
				return err // as it is, for inTx to retry
			}
			return what(i, err)
		}
	}
	return br.Close()
}

// AddRelations records relations directly (not derived from a record), in
// one transaction.
func (s *Store) AddRelations(ctx context.Context, rels []data.Relation) error {
	if err := data.CheckRelations(rels); err != nil {
		return err
	}
	sorted := slices.Clone(rels)
	slices.SortFunc(sorted, func(a, b data.Relation) int {
		return strings.Compare(a.Subject+"\x00"+a.Relation+"\x00"+a.Object, b.Subject+"\x00"+b.Relation+"\x00"+b.Object)
	})
	return s.inTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		for _, r := range sorted {
			b.Queue(`INSERT INTO relations (subject, relation, object, src_collection, src_id) VALUES ($1, $2, $3, '', '')
				ON CONFLICT DO NOTHING`, r.Subject, r.Relation, r.Object)
		}
		return sendBatch(ctx, tx, b, func(i int, err error) error { return err })
	})
}

// Update runs fn on the record collection/id in one transaction, the
// record's row locked (SELECT ... FOR UPDATE) until it commits; see
// data.Backend.Update. fn runs again when the transaction is retried.
func (s *Store) Update(ctx context.Context, collection, id string, fn func(tx data.Reader, r *data.Record, ok bool) error) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		r, ok, err := getRecord(ctx, tx, `SELECT owner, fields, labels FROM records WHERE collection = $1 AND id = $2 FOR UPDATE`, collection, id)
		if err != nil {
			return err
		}
		if err := fn(reader{tx}, &r, ok); err != nil {
			return err
		}
		if !ok {
			return nil
		}
		fields, err := data.EncodeFields(r.Fields)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE records SET fields = $1 WHERE collection = $2 AND id = $3`, fields, collection, id)
		return err
	})
}
