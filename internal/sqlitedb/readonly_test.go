package sqlitedb

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/internal/testfs"
)

// TestOpenReadOnly: a file in a directory nobody may write (root
// included) opens for reading, reads its rows, refuses writes, and is
// not called corrupted; a missing file is fs.ErrNotExist and is not
// created; an older schema is named as such, not upgraded.
func TestOpenReadOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.db")
	db, err := Open(path, v1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO t VALUES ('kept')"); err != nil {
		t.Fatal(err)
	}
	db.Close()

	if _, err := OpenReadOnly(filepath.Join(dir, "missing.db"), v1); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("reading created the missing file")
	}

	testfs.ReadOnly(t, dir)
	if _, err := Open(path, v1); err == nil || strings.Contains(err.Error(), "corrupted") {
		t.Errorf("opening for writing a read-only file: %v (want an error that does not say corrupted)", err)
	} else {
		t.Logf("opening for writing: %v", err)
	}
	db, err = OpenReadOnly(path, v1)
	if err != nil {
		t.Fatalf("reading a read-only file: %v", err)
	}
	defer db.Close()
	var a string
	if err := db.QueryRow("SELECT a FROM t").Scan(&a); err != nil || a != "kept" {
		t.Errorf("row: %q, %v", a, err)
	}
	if _, err := db.Exec("INSERT INTO t VALUES ('x')"); err == nil {
		t.Error("a read-only open wrote")
	}

	v2 := v1
	v2.Version = 2
	v2.Migrations = map[int]string{1: "ALTER TABLE t ADD COLUMN b TEXT"}
	if _, err := OpenReadOnly(path, v2); err == nil || !strings.Contains(err.Error(), "older") {
		t.Errorf("an older schema read by newer code: %v", err)
	}
}
