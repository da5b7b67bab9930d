package host

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/mandatevm/mandate/caps/data"
	"github.com/mandatevm/mandate/caps/data/pgstore"
	"github.com/mandatevm/mandate/internal/pgtest"
	"github.com/mandatevm/mandate/manifest"
)

// TestDataStoreChoice: a path opens SQLite, a postgres:// URL PostgreSQL,
// and seeds go to the store named.
func TestDataStoreChoice(t *testing.T) {
	ctx := context.Background()
	t.Setenv(DataStoreEnv, "")
	state := t.TempDir()
	if got := DataStore(state); got != filepath.Join(state, "data.db") {
		t.Errorf("DataStore: got %s, want STATE/data.db", got)
	}
	st, err := OpenDataStore(ctx, DataStore(state))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.(*data.Store); !ok {
		t.Errorf("a path opened a %T", st)
	}
	st.Close()

	srv := pgtest.Start(t)
	url := srv.NewDatabase(t)
	t.Setenv(DataStoreEnv, url)
	state = t.TempDir()
	if got := DataStore(state); got != url {
		t.Errorf("DataStore with $%s: got %s", DataStoreEnv, got)
	}
	file := filepath.Join(t.TempDir(), "people.json")
	if err := os.WriteFile(file, []byte(`[{"id":"p1","owner":"alice","fields":{"manager":"carol"}}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	seeds := []manifest.Seed{{Collection: "people", File: file, Relations: map[string]string{"manager": "manager_of"}}}
	if err := Seed(ctx, seeds, state); err != nil {
		t.Fatal(err)
	}
	st, err = OpenDataStore(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, ok := st.(*pgstore.Store); !ok {
		t.Errorf("a URL opened a %T", st)
	}
	if rel, err := st.Related(ctx, "carol", "manager_of"); err != nil || len(rel) != 1 || rel[0] != "alice" {
		t.Errorf("seeded relations: %v %v", rel, err)
	}
	if _, err := os.Stat(filepath.Join(state, "data.db")); err == nil {
		t.Error("seeding with a URL wrote the SQLite store")
	}
}
