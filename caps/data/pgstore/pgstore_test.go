package pgstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/mandatevm/mandate/caps/data"
	"github.com/mandatevm/mandate/caps/data/datatest"
	"github.com/mandatevm/mandate/caps/data/pgstore"
	"github.com/mandatevm/mandate/internal/pgtest"
)

func open(t testing.TB, url string) *pgstore.Store {
	t.Helper()
	st, err := pgstore.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestConformance runs the backends' suite on a real PostgreSQL server,
// each test in a database of its own.
func TestConformance(t *testing.T) {
	srv := pgtest.Start(t)
	datatest.Run(t, func(t *testing.T) data.Backend { return open(t, srv.NewDatabase(t)) })
}

// BenchmarkPostgres: go test -run '^$' -bench . ./caps/data/ ./caps/data/pgstore/
func BenchmarkPostgres(b *testing.B) {
	srv := pgtest.Start(b)
	datatest.Bench(b, func(b *testing.B) data.Backend { return open(b, srv.NewDatabase(b)) })
}

// TestOpenSchema: Open creates the schema in an empty database, once
// however many nodes open it at the same time, keeps what it holds, and
// refuses (leaving it as it was) a database that is not a data store.
func TestOpenSchema(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()

	url := srv.NewDatabase(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := pgstore.Open(ctx, url)
			if err != nil {
				errs <- err
				return
			}
			st.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("nodes opening an empty database together: %v", err)
	}
	st := open(t, url)
	datatest.Seed(t, st)
	st.Close()
	if _, ok, err := open(t, url).Get(ctx, "benefits", "b-bob"); err != nil || !ok {
		t.Errorf("reopened store lost b-bob: %v %v", ok, err)
	}

	for _, c := range []struct{ name, sql, want string }{
		{"other tables", `CREATE TABLE accounts (id int); CREATE TABLE records (x int)`,
			"not a Mandate data store (a PostgreSQL database whose schema public has other tables: accounts, records)"},
		{"newer", `CREATE TABLE mandate_store (kind text PRIMARY KEY, version integer NOT NULL); INSERT INTO mandate_store VALUES ('data', 7)`,
			"written by a newer Mandate (schema version 7, this one knows 1)"},
		{"another kind", `CREATE TABLE mandate_store (kind text PRIMARY KEY, version integer NOT NULL); INSERT INTO mandate_store VALUES ('runs', 1)`,
			"not a Mandate data store (schema public holds a Mandate store of another kind)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := srv.NewDatabase(t)
			db := url[strings.LastIndex(url, "/")+1 : strings.Index(url, "?")]
			srv.Exec(t, "postgres", "SELECT 1") // the server is up
			srv.Exec(t, db, c.sql)
			_, err := pgstore.Open(ctx, url)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			// Left as it was: the same error again, and no table added.
			srv.Exec(t, db, `DO $$ BEGIN IF (SELECT count(*) FROM pg_tables WHERE schemaname = 'public') <> 2 - (SELECT count(*) FROM pg_tables WHERE tablename = 'mandate_store') THEN RAISE 'altered'; END IF; END $$`)
		})
	}

	// A search_path naming a schema that does not exist.
	if _, err := pgstore.Open(ctx, srv.NewDatabase(t)+"&search_path=nowhere"); err == nil || !strings.Contains(err.Error(), "no schema to hold the data store") {
		t.Errorf("no schema: %v", err)
	}
	// One of its own, by search_path: a store beside other tables.
	url = srv.NewDatabase(t)
	db := url[strings.LastIndex(url, "/")+1 : strings.Index(url, "?")]
	srv.Exec(t, db, `CREATE TABLE accounts (id int); CREATE SCHEMA mandate`)
	st = open(t, url+"&search_path=mandate")
	datatest.Seed(t, st)
}

// TestPasswordNeverShown: messages and Location carry no password.
func TestPasswordNeverShown(t *testing.T) {
	for _, u := range []string{
		"postgres://mandate:s3cret@127.0.0.1:1/db?sslmode=disable&connect_timeout=1",
		"postgresql://mandate@127.0.0.1:1/db?password=s3cret&sslmode=disable&connect_timeout=1",
	} {
		if r := pgstore.Redact(u); strings.Contains(r, "s3cret") {
			t.Errorf("Redact(%q) = %q", u, r)
		}
		_, err := pgstore.Open(context.Background(), u)
		if err == nil {
			t.Fatalf("%s: opened a server that is not there", pgstore.Redact(u))
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
	if _, err := pgstore.Open(context.Background(), "postgres://u:s3cret@h:notaport/db"); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a bad URL: %v", err)
	}
	for s, want := range map[string]bool{"postgres://h/db": true, "postgresql://h/db": true, "/var/lib/data.db": false, "postgres.db": false} {
		if pgstore.IsURL(s) != want {
			t.Errorf("IsURL(%q) = %v", s, !want)
		}
	}
}
