package audit

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/mandatevm/mandate/internal/sqlitedb"
	"path/filepath"

	"golang.org/x/mod/sumdb/tlog"
)

// CheckHead is what a run checks before it starts: that the log can be
// trusted to record it. It refuses a log whose file SQLite finds damaged
// (PRAGMA quick_check), whose latest signed checkpoint does not open with
// the log's key or does not match the tree's stored hashes (the root
// recomputed from O(log n) stored hashes), whose entries after that
// checkpoint, or whose last entry, no longer match their leaf hashes, or
// which cannot be written (a read-only file, a full disk: a probe write
// is committed). Entries an earlier checkpoint already covers are not
// re-read: "mandate audit verify" checks every one.
func (l *Log) CheckHead(ctx context.Context) error {
	err := l.checkHead(ctx)
	var te *TamperError
	if errors.As(err, &te) {
		return fmt.Errorf("audit log %s: %w", l.path, err)
	}
	return err
}

func (l *Log) checkHead(ctx context.Context) error {
	var qc string
	if err := l.db.QueryRowContext(ctx, "PRAGMA quick_check(1)").Scan(&qc); err != nil {
		return fmt.Errorf("audit log %s: the file is damaged: %w", l.path, err)
	}
	if qc != "ok" {
		return fmt.Errorf("audit log %s: the file is damaged: %s", l.path, qc)
	}
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("audit log %s: %w", l.path, err)
	}
	defer tx.Rollback()
	var size int64
	if err := tx.QueryRowContext(ctx, "SELECT size FROM tree WHERE id = 0").Scan(&size); err != nil {
		return fmt.Errorf("audit log %s: %w", l.path, err)
	}
	stored := storedHashes(ctx, tx)
	tampered := func(format string, args ...any) error {
		return &TamperError{Entry: -1, Reason: fmt.Sprintf(format, args...)}
	}
	// The latest signed checkpoint against the stored hashes.
	var signed []byte
	var covered int64
	switch err := tx.QueryRowContext(ctx, "SELECT signed FROM checkpoints ORDER BY id DESC LIMIT 1").Scan(&signed); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return fmt.Errorf("audit log %s: %w", l.path, err)
	default:
		c, err := openCheckpoint(signed, l.verif)
		if err != nil {
			return tampered("the latest checkpoint: %v", err)
		}
		if c.Size > size {
			return tampered("the latest checkpoint covers %d entries, the tree has %d", c.Size, size)
		}
		h, err := tlog.TreeHash(c.Size, stored)
		if err != nil {
			return tampered("the stored hashes: %v", err)
		}
		if h != c.Hash {
			return tampered("the stored hashes do not match the latest checkpoint (%d entries)", c.Size)
		}
		covered = c.Size
	}
	// The entries no checkpoint covers yet, and the last entry, against
	// their leaf hashes.
	var lastRow sql.NullInt64
	if err := tx.QueryRowContext(ctx, "SELECT max(idx) FROM entries").Scan(&lastRow); err != nil {
		return fmt.Errorf("audit log %s: %w", l.path, err)
	}
	if last := lastRow.Int64; (!lastRow.Valid && size != 0) || (lastRow.Valid && last != size-1) {
		return tampered("the tree has %d entries, the last entry row is %d", size, last)
	}
	from := min(covered, max(size-1, 0))
	rows, err := tx.QueryContext(ctx, `SELECT `+entryColumns+`
		FROM entries WHERE idx >= ? ORDER BY idx`, from)
	if err != nil {
		return fmt.Errorf("audit log %s: %w", l.path, err)
	}
	defer rows.Close()
	for rows.Next() {
		var e Entry
		if err := scanEntry(rows, &e); err != nil {
			return fmt.Errorf("audit log %s: %w", l.path, err)
		}
		hs, err := stored.ReadHashes([]int64{tlog.StoredHashIndex(0, e.Seq)})
		if err != nil {
			return tampered("entry %d: %v", e.Seq, err)
		}
		if leaf := tlog.RecordHash(e.canonical()); !bytes.Equal(leaf[:], hs[0][:]) {
			return &TamperError{Entry: e.Seq, Reason: "does not match its leaf hash: changed after it was recorded"}
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("audit log %s: %w", l.path, err)
	}
	rows.Close()
	// A probe write, committed: the run's decisions can be recorded. The
	// row is changed and changed back, so a page really is written to the
	// journal (SQLite skips an update that leaves a row as it was, which
	// would prove only that the lock can be taken, not that the disk has
	// room).
	if _, err := tx.ExecContext(ctx, "UPDATE tree SET size = size + 1 WHERE id = 0; UPDATE tree SET size = size - 1 WHERE id = 0"); err != nil {
		return fmt.Errorf("audit log %s cannot be written: %w%s", l.path, err, sqlitedb.SpaceHint(filepath.Dir(l.path)))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("audit log %s cannot be written: %w%s", l.path, err, sqlitedb.SpaceHint(filepath.Dir(l.path)))
	}
	return nil
}
