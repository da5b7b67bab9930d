package sqlitedb

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var v1 = Config{What: "test store", AppID: 0x54455354, Version: 1, Schema: "CREATE TABLE t (a TEXT)"}

// TestMigrations opens a version-1 file with version-3 code: both
// migrations apply, the data stays, and the file is then version 3.
func TestMigrations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := Open(path, v1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO t VALUES ('kept')"); err != nil {
		t.Fatal(err)
	}
	db.Close()

	v3 := v1
	v3.Version = 3
	v3.Schema = "CREATE TABLE t (a TEXT, b TEXT); CREATE TABLE u (c TEXT)"
	v3.Migrations = map[int]string{1: "ALTER TABLE t ADD COLUMN b TEXT", 2: "CREATE TABLE u (c TEXT)"}
	db, err = Open(path, v3)
	if err != nil {
		t.Fatalf("upgrading: %v", err)
	}
	var a string
	var version int
	if err := db.QueryRow("SELECT a FROM t WHERE b IS NULL").Scan(&a); err != nil || a != "kept" {
		t.Errorf("row after upgrade: %q, %v", a, err)
	}
	if err := db.QueryRow("PRAGMA user_version").Scan(&version); err != nil || version != 3 {
		t.Errorf("version after upgrade: %d, %v", version, err)
	}
	db.Close()

	// The older code refuses the newer file.
	if _, err := Open(path, v1); err == nil || !strings.Contains(err.Error(), "newer Mandate") {
		t.Errorf("v1 code on a v3 file: %v", err)
	}
}

// TestMigrationFailureChangesNothing: a migration that fails leaves the
// file at its version with its data.
func TestMigrationFailureChangesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := Open(path, v1)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	bad := v1
	bad.Version = 3
	bad.Migrations = map[int]string{1: "ALTER TABLE t ADD COLUMN b TEXT", 2: "THIS IS NOT SQL"}
	if _, err := Open(path, bad); err == nil || !strings.Contains(err.Error(), "from version 2 to 3") {
		t.Fatalf("bad migration: %v", err)
	}
	noPath := v1
	noPath.Version = 2
	if _, err := Open(path, noPath); err == nil || !strings.Contains(err.Error(), "no migration from 1") {
		t.Fatalf("missing migration: %v", err)
	}
	db, err = Open(path, v1)
	if err != nil {
		t.Fatalf("the file was changed by a failed upgrade: %v", err)
	}
	if _, err := db.Exec("INSERT INTO t (a) VALUES ('x')"); err != nil {
		t.Fatal(err)
	}
	db.Close()
}

func TestForeignAndCorrupt(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(junk, []byte(strings.Repeat("not a database ", 200)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(junk, v1); err == nil || !strings.Contains(err.Error(), "not a Mandate test store") {
		t.Errorf("junk file: %v", err)
	}
	other := filepath.Join(dir, "other.db")
	odb, err := Open(other, Config{What: "other", AppID: 0x4f544852, Version: 1, Schema: "CREATE TABLE z (a)"})
	if err != nil {
		t.Fatal(err)
	}
	odb.Close()
	if _, err := Open(other, v1); err == nil || !strings.Contains(err.Error(), "application id") {
		t.Errorf("another application's file: %v", err)
	}
}

// TestConcurrentCreate: many openers of one new file at once all succeed;
// exactly one creates the schema.
func TestConcurrentCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	const n = 8
	errs := make(chan error, n)
	for range n {
		go func() {
			db, err := Open(path, v1)
			if err == nil {
				db.Close()
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
