// Package sqlitedb opens the embedded SQLite files Mandate keeps (the data
// store, the audit log) the same way: WAL journal, a busy timeout,
// immediate write transactions, and a schema identified by SQLite's
// application_id and versioned by user_version, so that a corrupted file,
// another program's database or a newer schema is a clear error, never a
// silent reset.
//
//	db, err := sqlitedb.Open(path, sqlitedb.Config{
//		What: "data store", AppID: 0x4d4e4453, Version: 1, Schema: schema,
//		Pragmas: []string{"synchronous(NORMAL)"},
//	})
package sqlitedb

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver, pure Go
)

// Config describes one kind of database file.
type Config struct {
	// What names the file in errors, e.g. "audit log".
	What string
	// AppID marks the file as ours (PRAGMA application_id).
	AppID int
	// Version is the schema version this code writes and reads.
	Version int
	// Schema creates the tables of a new, empty file, at Version.
	Schema string
	// Migrations upgrade an older file: Migrations[v] takes a file at
	// schema version v to v+1 (index 0 is unused: version 0 is an empty
	// file). A file whose version has no path to Version is an error.
	// Upgrades run in one transaction: all of them apply or none.
	Migrations map[int]string
	// Pragmas are added to the connection's, e.g. "synchronous(FULL)".
	Pragmas []string
}

// Open opens (creating if needed, with its directory) the database at
// path and checks or creates its schema. Errors name the file.
func Open(path string, c Config) (*sql.DB, error) {
	if path == "" {
		return nil, fmt.Errorf("%s: empty path", c.What)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("%s %s: %w", c.What, path, err)
	}
	// A writer needs the directory too (the WAL and its index live next
	// to the file): say so, rather than let SQLite fail obscurely.
	if !Writable(filepath.Dir(path)) {
		return nil, fmt.Errorf("%s %s: cannot be written: its directory is read-only for this process "+
			"(reading works: mandate runs, graph, logs, audit)", c.What, path)
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	for _, p := range c.Pragmas {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", c.What, path, err)
	}
	if err := initSchema(context.Background(), db, c); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s %s: %w", c.What, path, withSpaceHint(err, filepath.Dir(path)))
	}
	return db, nil
}

func initSchema(ctx context.Context, db *sql.DB, c Config) error {
	notOurs := func(err error) error { return readError(c, err) }
	var appID, version int
	if err := db.QueryRowContext(ctx, "PRAGMA application_id").Scan(&appID); err != nil {
		return notOurs(err)
	}
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return notOurs(err)
	}
	switch {
	case appID == c.AppID && version == c.Version:
	case appID == c.AppID && version > c.Version:
		return fmt.Errorf("written by a newer Mandate (schema version %d, this one knows %d)", version, c.Version)
	case appID == c.AppID && version >= 1:
		if err := migrate(ctx, db, c, version); err != nil {
			return err
		}
	case appID == c.AppID:
		return fmt.Errorf("unknown schema version %d", version)
	case appID != 0:
		return fmt.Errorf("not a Mandate %s (SQLite application id %#x)", c.What, appID)
	default:
		// Empty, or another program's: decide under the write lock, since
		// another process (or connection) may be creating the schema right
		// now; it then is ours by the time we hold the lock.
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := tx.QueryRowContext(ctx, "PRAGMA application_id").Scan(&appID); err != nil {
			return notOurs(err)
		}
		if appID != 0 {
			tx.Rollback()
			return initSchema(ctx, db, c)
		}
		var n int
		if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
			return notOurs(err)
		}
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&n); err != nil {
			return notOurs(err)
		}
		if n != 0 || version != 0 {
			return fmt.Errorf("not a Mandate %s (a SQLite database with other tables)", c.What)
		}
		if _, err := tx.ExecContext(ctx, c.Schema); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id = %d; PRAGMA user_version = %d", c.AppID, c.Version)); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return useWAL(ctx, db)
}

// useWAL puts the file in WAL mode (a setting kept in the file, so usually
// already on). Switching needs the file to itself and SQLite does not wait
// for it, so several openers of a new file retry briefly.
func useWAL(ctx context.Context, db *sql.DB) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	for try := 0; mode != "wal"; try++ {
		err := db.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode)
		if err != nil && !strings.Contains(err.Error(), "SQLITE_BUSY") || try == 100 {
			if err == nil {
				err = fmt.Errorf("the journal stayed %q", mode)
			}
			return fmt.Errorf("cannot switch to the WAL journal: %w", err)
		}
		if err != nil || mode != "wal" {
			time.Sleep(time.Duration(1+try) * time.Millisecond)
		}
	}
	return nil
}

// migrate upgrades a file at schema version from to c.Version.
func migrate(ctx context.Context, db *sql.DB, c Config, from int) error {
	for v := from; v < c.Version; v++ {
		if _, ok := c.Migrations[v]; !ok {
			return fmt.Errorf("schema version %d cannot be upgraded to %d (no migration from %d)", from, c.Version, v)
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// Another process may have upgraded the file since we looked.
	var now int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&now); err != nil {
		return err
	}
	if now != from {
		if now == c.Version {
			return nil
		}
		return fmt.Errorf("schema version changed from %d to %d while opening", from, now)
	}
	for v := from; v < c.Version; v++ {
		if _, err := tx.ExecContext(ctx, c.Migrations[v]); err != nil {
			return fmt.Errorf("upgrading the schema from version %d to %d: %w", v, v+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", c.Version)); err != nil {
		return err
	}
	return tx.Commit()
}
