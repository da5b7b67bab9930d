package data

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
)

// Reader is what the kind reads to decide a call: records and the
// principals' relations. Inside Backend.Update it reads within the
// update's transaction.
type Reader interface {
	// Get returns the record collection/id, or ok false.
	Get(ctx context.Context, collection, id string) (r Record, ok bool, err error)
	// Owned returns the records of collection whose owner is owner,
	// sorted by id.
	Owned(ctx context.Context, collection, owner string) ([]Record, error)
	// Related returns the objects subject is relation of, sorted and
	// distinct.
	Related(ctx context.Context, subject, relation string) ([]string, error)
}

// Backend is where the data kind's records and relations live: the
// embedded SQLite Store (Open, the default) or a PostgreSQL server that a
// fleet of nodes shares (package caps/data/pgstore). Every backend
// validates with the same code (PlanImport, CheckRelations), sorts ids
// bytewise, and passes the conformance suite in caps/data/datatest. It is
// safe for concurrent use, from one process or (PostgreSQL) many; every
// method honours its context.
type Backend interface {
	Reader
	// Records returns every record of collection, sorted by id.
	Records(ctx context.Context, collection string) ([]Record, error)
	// Import stores records in collection in one transaction, as
	// Store.Import documents.
	Import(ctx context.Context, collection string, records []Record, opts ImportOptions) (int, error)
	// AddRelations records relations directly (not derived from a
	// record), in one transaction.
	AddRelations(ctx context.Context, rels []Relation) error
	// Update runs fn on the record collection/id inside one write
	// transaction, the record locked against every other writer (no
	// update is lost), and stores the fields fn leaves in the record when
	// it returns nil; owner and labels are kept. fn is called with ok
	// false when the record does not exist (nothing is stored then), and
	// reads through tx within the transaction. Nothing is written when fn
	// fails, and its error is returned as it is. fn may be called more
	// than once (a transaction retried after a serialization failure), so
	// it must have no effect outside r.
	Update(ctx context.Context, collection, id string, fn func(tx Reader, r *Record, ok bool) error) error
	// Location says where the store is, for messages: a file path, or a
	// URL without its password.
	Location() string
	// Close releases the backend.
	Close() error
}

var _ Backend = (*Store)(nil)

// ImportPlan is an import validated and normalized by PlanImport, ready
// for a backend to store in one transaction.
type ImportPlan struct {
	Collection string
	Records    []PlannedRecord // in the import's order
}

// PlannedRecord is one record of an ImportPlan, encoded as the backends
// store it.
type PlannedRecord struct {
	Index  int // in the import, for errors ("record 3: ...")
	Record Record
	// Fields and Labels are the record's fields and labels as stored: a
	// JSON object each.
	Fields, Labels string
	// Edges are the relations derived from the record (Object is its
	// owner), sorted and distinct; they replace those the record derived
	// before.
	Edges []Relation
}

// PlanImport validates an import of records into collection and returns
// it normalized (see Store.Import for the rules). A backend's Import calls
// it first and stores nothing when it fails. Errors name the record's
// index (0-based).
func PlanImport(collection string, records []Record, opts ImportOptions) (*ImportPlan, error) {
	if err := validName(collection, MaxNameLen); err != nil {
		return nil, fmt.Errorf("collection: %v", err)
	}
	if len(records) > MaxImportRecords {
		return nil, fmt.Errorf("%d records (max %d)", len(records), MaxImportRecords)
	}
	for f, rel := range opts.Relations {
		if err := validFieldName(f); err != nil {
			return nil, fmt.Errorf("relation field: %v", err)
		}
		if err := validName(rel, MaxNameLen); err != nil {
			return nil, fmt.Errorf("relation name: %v", err)
		}
	}
	p := &ImportPlan{Collection: collection, Records: make([]PlannedRecord, len(records))}
	seen := make(map[string]int, len(records))
	for i, r := range records {
		n, err := normalize(r)
		if err != nil {
			return nil, fmt.Errorf("record %d: %v", i, err)
		}
		if j, dup := seen[n.ID]; dup {
			return nil, fmt.Errorf("record %d: id %q repeats record %d", i, n.ID, j)
		}
		seen[n.ID] = i
		fields, _ := json.Marshal(n.Fields)
		labels, _ := json.Marshal(n.Labels)
		p.Records[i] = PlannedRecord{Index: i, Record: n, Fields: string(fields), Labels: string(labels)}
	}
	// Relation fields are read once every record is known good, so that a
	// bad record is reported before a bad relation field, as it always was.
	for i := range p.Records {
		pr := &p.Records[i]
		for f, rel := range opts.Relations {
			v, ok := pr.Record.Fields[f]
			if !ok {
				continue
			}
			subjects, err := relationSubjects(v)
			if err != nil {
				return nil, fmt.Errorf("record %d: relation field %s: %v", i, f, err)
			}
			for _, sub := range subjects {
				pr.Edges = append(pr.Edges, Relation{Subject: sub, Relation: rel, Object: pr.Record.Owner})
			}
		}
		slices.SortFunc(pr.Edges, compareRelations)
		pr.Edges = slices.Compact(pr.Edges)
	}
	return p, nil
}

func compareRelations(a, b Relation) int {
	return cmp.Or(cmp.Compare(a.Subject, b.Subject), cmp.Compare(a.Relation, b.Relation), cmp.Compare(a.Object, b.Object))
}

// CheckRelations validates relations for AddRelations: every subject,
// relation and object a valid name. Errors name the relation's index.
func CheckRelations(rels []Relation) error {
	for i, r := range rels {
		for _, v := range []string{r.Subject, r.Relation, r.Object} {
			if err := validName(v, MaxNameLen); err != nil {
				return fmt.Errorf("relation %d: %v", i, err)
			}
		}
	}
	return nil
}

// EncodeFields encodes a record's fields as a backend stores them.
func EncodeFields(fields map[string]json.RawMessage) (string, error) {
	b, err := json.Marshal(fields)
	return string(b), err
}

// DecodeRecord decodes a record as a backend stores it: fields and labels
// each a JSON object. A value that does not decode is an error that names
// the record (a damaged store).
func DecodeRecord(id, owner, fields, labels string) (Record, error) {
	return decodeRecord(id, owner, fields, labels)
}
