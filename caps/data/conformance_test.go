package data_test

import (
	"path/filepath"
	"testing"

	"github.com/mandatevm/mandate/caps/data"
	"github.com/mandatevm/mandate/caps/data/datatest"
)

func openSQLite(t testing.TB) data.Backend {
	t.Helper()
	s, err := data.Open(filepath.Join(t.TempDir(), "data.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestConformance runs the backends' suite on the SQLite store; pgstore
// runs it on PostgreSQL.
func TestConformance(t *testing.T) {
	datatest.Run(t, func(t *testing.T) data.Backend { return openSQLite(t) })
}

// BenchmarkSQLite: go test -run '^$' -bench . ./caps/data/ ./caps/data/pgstore/
func BenchmarkSQLite(b *testing.B) {
	datatest.Bench(b, func(b *testing.B) data.Backend { return openSQLite(b) })
}
