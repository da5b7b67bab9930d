package data

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "sub", "data.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

const benefitsJSON = `[
 {"id":"b-alice","owner":"alice","fields":{"plan":"gold","dental":true,"salary":100,"passport":"A123"},"labels":{"passport":["pii:$owner"],"salary":["financial:$owner","hr"]}},
 {"id":"b-bob","owner":"bob","fields":{"plan":"silver","dental":false,"salary":90,"passport":"B456"},"labels":{"passport":["pii:$owner"],"salary":["financial:$owner"]}},
 {"id":"b-dave","owner":"dave","fields":{"plan":"gold","dental":true,"salary":80,"passport":"D789"},"labels":{"passport":["pii:$owner"]}},
 {"id":"b-carol","owner":"carol","fields":{"plan":"platinum","dental":true,"salary":200,"passport":"C000"},"labels":{"passport":["pii:$owner"]}}
]`

const peopleCSV = `id,owner,name,manager,"email[pii:$owner,contact]"
p-alice,alice,Alice,carol,alice@example.com
p-bob,bob,Bob,erin,bob@example.com
p-dave,dave,Dave,carol,
p-carol,carol,Carol,,carol@example.com
`

// seed imports the benefits (JSON) and people (CSV, manager -> manager_of).
func seed(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	recs, err := ParseJSON(strings.NewReader(benefitsJSON))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.Import(ctx, "benefits", recs, ImportOptions{}); err != nil || n != 4 {
		t.Fatalf("import benefits: %d, %v", n, err)
	}
	people, err := ParseCSV(strings.NewReader(peopleCSV))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.Import(ctx, "people", people, ImportOptions{Relations: map[string]string{"manager": "manager_of"}}); err != nil || n != 4 {
		t.Fatalf("import people: %d, %v", n, err)
	}
}

// dump returns every row of the store, for "nothing changed" checks.
func dump(t *testing.T, s *Store) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		`SELECT collection || '|' || id || '|' || owner || '|' || fields || '|' || labels FROM records ORDER BY collection, id`,
		`SELECT subject || '|' || relation || '|' || object || '|' || src_collection || '|' || src_id FROM relations ORDER BY 1`,
	} {
		rows, err := s.db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var l string
			if err := rows.Scan(&l); err != nil {
				t.Fatal(err)
			}
			b.WriteString(l + "\n")
		}
		rows.Close()
	}
	return b.String()
}

func TestImportJSONLabelsOwner(t *testing.T) {
	s := openTemp(t)
	seed(t, s)
	ctx := context.Background()
	r, ok, err := s.Get(ctx, "benefits", "b-alice")
	if err != nil || !ok {
		t.Fatalf("get: %v %v", ok, err)
	}
	if got := r.Labels["passport"]; !reflect.DeepEqual(got, []string{"pii:alice"}) {
		t.Errorf("passport labels %v", got)
	}
	if got := r.Labels["salary"]; !reflect.DeepEqual(got, []string{"financial:alice", "hr"}) {
		t.Errorf("salary labels %v", got)
	}
	if string(r.Fields["dental"]) != "true" || string(r.Fields["plan"]) != `"gold"` {
		t.Errorf("fields %s", r.Fields)
	}
	if _, ok := r.Labels["plan"]; ok {
		t.Errorf("plan must be unlabelled: %v", r.Labels)
	}
}

func TestImportCSV(t *testing.T) {
	s := openTemp(t)
	seed(t, s)
	ctx := context.Background()
	r, ok, err := s.Get(ctx, "people", "p-alice")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if got := r.Labels["email"]; !reflect.DeepEqual(got, []string{"contact", "pii:alice"}) {
		t.Errorf("email labels %v", got)
	}
	if string(r.Fields["email"]) != `"alice@example.com"` {
		t.Errorf("email %s", r.Fields["email"])
	}
	d, _, _ := s.Get(ctx, "people", "p-dave")
	if _, has := d.Fields["email"]; has {
		t.Errorf("an empty cell must leave the field out: %s", d.Fields)
	}
	rel, err := s.Related(ctx, "carol", "manager_of")
	if err != nil || !reflect.DeepEqual(rel, []string{"alice", "dave"}) {
		t.Errorf("carol manager_of %v %v", rel, err)
	}
	if rel, _ := s.Related(ctx, "erin", "manager_of"); !reflect.DeepEqual(rel, []string{"bob"}) {
		t.Errorf("erin manager_of %v", rel)
	}
	// Re-importing a record replaces it and its relations.
	if _, err := s.Import(ctx, "people", []Record{{ID: "p-dave", Owner: "dave", Fields: map[string]json.RawMessage{"manager": json.RawMessage(`"erin"`)}}}, ImportOptions{Relations: map[string]string{"manager": "manager_of"}}); err != nil {
		t.Fatal(err)
	}
	if rel, _ := s.Related(ctx, "carol", "manager_of"); !reflect.DeepEqual(rel, []string{"alice"}) {
		t.Errorf("after re-import carol manager_of %v", rel)
	}
	if rel, _ := s.Related(ctx, "erin", "manager_of"); !reflect.DeepEqual(rel, []string{"bob", "dave"}) {
		t.Errorf("after re-import erin manager_of %v", rel)
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"json not array", `{"id":"x"}`, "want a JSON array"},
		{"json unknown key", `[{"id":"a","owner":"o","fields":{}},{"id":"b","owner":"o","feilds":{}}]`, `record 1: json: unknown field "feilds"`},
		{"json missing owner", `[{"id":"a","fields":{}}]`, `record 0: missing "owner"`},
		{"json label unknown field", `[{"id":"a","owner":"o","fields":{},"labels":{"x":["t"]}}]`, `record 0: labels for field "x"`},
		{"json star field", `[{"id":"a","owner":"o","fields":{"*":1}}]`, `record 0: field name`},
		{"json empty tag", `[{"id":"a","owner":"o","fields":{"x":1},"labels":{"x":[""]}}]`, `record 0: field x: label: empty`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseJSON(strings.NewReader(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want %q", err, c.want)
			}
		})
	}
	for _, c := range []struct{ name, in, want string }{
		{"no header", ``, "line 1: missing the header row"},
		{"no owner", "id,plan\nx,y\n", `must have columns "id" and "owner"`},
		{"bad label header", "id,owner,plan[pii\nx,y,z\n", "line 1: column 3"},
		{"repeat column", "id,owner,plan,plan\n", `column "plan" repeats`},
		{"wrong count", "id,owner,plan\na,o,p\nb,o\n", "record on line 3: wrong number of fields"},
		{"empty owner", "id,owner,plan\na,o,p\nb,,p\n", "line 3: owner: empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseCSV(strings.NewReader(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want %q", err, c.want)
			}
		})
	}
}

func TestImportTransactional(t *testing.T) {
	s := openTemp(t)
	seed(t, s)
	before := dump(t, s)
	ctx := context.Background()
	bad := []Record{
		{ID: "n1", Owner: "zed", Fields: map[string]json.RawMessage{"plan": json.RawMessage(`"x"`)}},
		{ID: "b-alice", Owner: "alice", Fields: map[string]json.RawMessage{"plan": json.RawMessage(`"hacked"`)}},
		{ID: "n2", Owner: "", Fields: map[string]json.RawMessage{}},
	}
	if _, err := s.Import(ctx, "benefits", bad, ImportOptions{}); err == nil || !strings.Contains(err.Error(), "record 2: owner: empty") {
		t.Fatalf("got %v", err)
	}
	dup := []Record{{ID: "n1", Owner: "zed"}, {ID: "n1", Owner: "zed"}}
	if _, err := s.Import(ctx, "benefits", dup, ImportOptions{}); err == nil || !strings.Contains(err.Error(), "record 1: id \"n1\" repeats record 0") {
		t.Fatalf("got %v", err)
	}
	// A relation field of the wrong type fails inside the transaction.
	relBad := []Record{
		{ID: "p-new", Owner: "zed", Fields: map[string]json.RawMessage{"manager": json.RawMessage(`"carol"`)}},
		{ID: "p-new2", Owner: "zed2", Fields: map[string]json.RawMessage{"manager": json.RawMessage(`42`)}},
	}
	if _, err := s.Import(ctx, "people", relBad, ImportOptions{Relations: map[string]string{"manager": "manager_of"}}); err == nil || !strings.Contains(err.Error(), "record 1: relation field manager") {
		t.Fatalf("got %v", err)
	}
	if after := dump(t, s); after != before {
		t.Errorf("a failed import changed the store:\nbefore\n%s\nafter\n%s", before, after)
	}
}

func TestOpenCorrupted(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("this is not a database\n", 500)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(garbage); err == nil || !strings.Contains(err.Error(), "not a Mandate data store") {
		t.Errorf("garbage: %v", err)
	}

	// Another program's SQLite database.
	foreign := filepath.Join(dir, "foreign.db")
	db, err := sql.Open("sqlite", foreign)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE t (x)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(foreign); err == nil || !strings.Contains(err.Error(), "not a Mandate data store (a SQLite database with other tables)") {
		t.Errorf("foreign: %v", err)
	}

	// A newer schema.
	s, err := Open(filepath.Join(dir, "new.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(`PRAGMA user_version = 7`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(filepath.Join(dir, "new.db")); err == nil || !strings.Contains(err.Error(), "newer Mandate") {
		t.Errorf("newer: %v", err)
	}

	// Reopening a good store works and keeps its data.
	p := filepath.Join(dir, "good.db")
	s, err = Open(p)
	if err != nil {
		t.Fatal(err)
	}
	seed(t, s)
	s.Close()
	s, err = Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok, _ := s.Get(context.Background(), "benefits", "b-bob"); !ok {
		t.Error("reopened store lost b-bob")
	}

	// A truncated (corrupted) store.
	b, _ := os.ReadFile(p)
	trunc := filepath.Join(dir, "trunc.db")
	if err := os.WriteFile(trunc, append(b[:100:100], make([]byte, 300)...), 0o600); err != nil {
		t.Fatal(err)
	}
	if s2, err := Open(trunc); err == nil {
		_, _, gerr := s2.Get(context.Background(), "benefits", "b-bob")
		s2.Close()
		if gerr == nil {
			t.Errorf("a truncated store opened and read without error")
		}
	}
}

func TestStoreConcurrent(t *testing.T) {
	s := openTemp(t)
	seed(t, s)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				id := "c" + string(rune('a'+i))
				if _, err := s.Import(ctx, "conc", []Record{{ID: id, Owner: "o", Fields: map[string]json.RawMessage{"n": json.RawMessage("1")}}}, ImportOptions{}); err != nil {
					t.Error(err)
					return
				}
				if _, _, err := s.Get(ctx, "benefits", "b-alice"); err != nil {
					t.Error(err)
					return
				}
			}
		}(i)
	}
	wg.Wait()
	rs, err := s.Records(ctx, "conc")
	if err != nil || len(rs) != 8 {
		t.Errorf("%d records, %v", len(rs), err)
	}
}

func TestOpenOddPath(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a dir?x=1#frag", "data %41.db")
	s, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	seed(t, s)
	s.Close()
	if _, err := os.Stat(p); err != nil {
		t.Errorf("the store is not at %s: %v", p, err)
	}
	s, err = Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var mode string
	if err := s.db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode %q %v", mode, err)
	}
	if _, ok, _ := s.Get(context.Background(), "benefits", "b-alice"); !ok {
		t.Error("lost b-alice")
	}
}
