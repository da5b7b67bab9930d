package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
)

// OpenReadOnly opens the existing database at path for reading only: it
// creates nothing, writes nothing (no schema, no upgrade, no journal
// switch), and works on a read-only file, directory or filesystem, so a
// state directory can be inspected where it cannot be written (a
// snapshot, a read-only mount, another user's copy). A missing file is an
// error wrapping fs.ErrNotExist; a file at an older schema version is an
// error that says to open it once with write access (reading does not
// upgrade it).
//
// SQLite reads a WAL database through its -shm file, which a read-only
// directory cannot hold: when the directory cannot be written and no -wal
// file is there (no writer has the file open), the file is opened as
// immutable, which SQLite reads without any shared memory.
func OpenReadOnly(path string, c Config) (*sql.DB, error) {
	if path == "" {
		return nil, fmt.Errorf("%s: empty path", c.What)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", c.What, path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s %s: not a regular file", c.What, path)
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Set("mode", "ro")
	if !Writable(filepath.Dir(path)) {
		if _, err := os.Stat(path + "-wal"); errors.Is(err, fs.ErrNotExist) {
			q.Set("immutable", "1")
		}
	}
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", c.What, path, err)
	}
	if err := checkSchema(context.Background(), db, c); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s %s: %w", c.What, path, withSpaceHint(err, filepath.Dir(path)))
	}
	return db, nil
}

// checkSchema checks, without writing, that db holds c's schema at
// c.Version.
func checkSchema(ctx context.Context, db *sql.DB, c Config) error {
	var appID, version int
	if err := db.QueryRowContext(ctx, "PRAGMA application_id").Scan(&appID); err != nil {
		return readError(c, err)
	}
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return readError(c, err)
	}
	switch {
	case appID == c.AppID && version == c.Version:
		return nil
	case appID == c.AppID && version > c.Version:
		return fmt.Errorf("written by a newer Mandate (schema version %d, this one knows %d)", version, c.Version)
	case appID == c.AppID && version >= 1:
		return fmt.Errorf("schema version %d is older than this Mandate's %d, and reading does not upgrade it: "+
			"run any mandate command that writes (mandate run) with write access to it once", version, c.Version)
	case appID == c.AppID:
		return fmt.Errorf("unknown schema version %d", version)
	case appID != 0:
		return fmt.Errorf("not a Mandate %s (SQLite application id %#x)", c.What, appID)
	}
	return fmt.Errorf("not a Mandate %s (no Mandate schema in it)", c.What)
}

// readError describes an error reading a file's header: damage only when
// SQLite says so, never for a file that merely cannot be opened or
// written.
func readError(c Config, err error) error {
	var se interface{ Code() int }
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqliteCorrupt, sqliteNotADB:
			return fmt.Errorf("not a Mandate %s (corrupted, or not a SQLite database): %w", c.What, err)
		case sqliteCantOpen, sqliteReadOnly, sqlitePerm, sqliteAuth:
			return fmt.Errorf("cannot be opened (is the file or its directory not readable, or not writable where writing is needed?): %w", err)
		case sqliteIOErr, sqliteFull:
			return fmt.Errorf("cannot be read or written: %w", err)
		}
	}
	return fmt.Errorf("cannot be read: %w", err)
}

// withSpaceHint adds to an I/O error about a file in dir that the
// filesystem holding it is (nearly) full, when it is.
func withSpaceHint(err error, dir string) error {
	var se interface{ Code() int }
	if errors.As(err, &se) {
		if code := se.Code() & 0xff; code == sqliteIOErr || code == sqliteFull {
			if h := SpaceHint(dir); h != "" {
				return fmt.Errorf("%w%s", err, h)
			}
		}
	}
	return err
}

// SpaceHint says, for an I/O error about a file in dir, when the
// filesystem holding dir is (nearly) full: "" otherwise, or when it
// cannot be asked.
func SpaceHint(dir string) string {
	free, ok := freeBytes(dir)
	if !ok || free >= lowSpace {
		return ""
	}
	return fmt.Sprintf(" (no space left on the device: %d bytes free where %s is)", free, dir)
}

// lowSpace is free space below which an I/O error is blamed on it.
const lowSpace = 1 << 20

// SQLite's primary result codes that readError tells apart.
const (
	sqlitePerm     = 3
	sqliteReadOnly = 8
	sqliteCorrupt  = 11
	sqliteIOErr    = 10
	sqliteFull     = 13
	sqliteCantOpen = 14
	sqliteAuth     = 23
	sqliteNotADB   = 26
)
