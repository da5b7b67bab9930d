package audit

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// checkpointHeader is the first line of a checkpoint note's text. The text
// is three lines:
//
//	mandate audit log v1
//	<tree size, decimal>
//	<root hash, standard base64>
const checkpointHeader = "mandate audit log v1"

// Checkpoint is a tree head: the number of entries and the root hash.
type Checkpoint struct {
	Size int64
	Hash tlog.Hash
}

func (c Checkpoint) text() string {
	return fmt.Sprintf("%s\n%d\n%s\n", checkpointHeader, c.Size, base64.StdEncoding.EncodeToString(c.Hash[:]))
}

func parseCheckpointText(text string) (Checkpoint, error) {
	lines := strings.SplitAfter(text, "\n")
	if len(lines) != 4 || lines[3] != "" || lines[0] != checkpointHeader+"\n" {
		return Checkpoint{}, errors.New("malformed checkpoint text")
	}
	n, err := strconv.ParseInt(strings.TrimSuffix(lines[1], "\n"), 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10)+"\n" != lines[1] {
		return Checkpoint{}, errors.New("malformed checkpoint size")
	}
	// Strict: nonzero padding bits would give one tree head many texts.
	h, err := base64.StdEncoding.Strict().DecodeString(strings.TrimSuffix(lines[2], "\n"))
	if err != nil || len(h) != tlog.HashSize {
		return Checkpoint{}, errors.New("malformed checkpoint hash")
	}
	c := Checkpoint{Size: n}
	copy(c.Hash[:], h)
	return c, nil
}

// OpenCheckpoint checks the signature of a signed checkpoint with the
// verifier key vkey (see VerifierKey) and returns the tree head it signs.
func OpenCheckpoint(signed []byte, vkey string) (Checkpoint, error) {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("audit checkpoint: verifier key: %w", err)
	}
	return openCheckpoint(signed, v)
}

func openCheckpoint(signed []byte, v note.Verifier) (Checkpoint, error) {
	n, err := openNote(signed, v)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("audit checkpoint: %w", err)
	}
	c, err := parseCheckpointText(n.Text)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("audit checkpoint: %w", err)
	}
	return c, nil
}

// openNote checks a signed note with v, byte for byte. note.Open accepts
// a signature whose base64 has nonzero padding bits; refuse any encoding
// but the canonical one, so that a signed note is valid byte for byte or
// not at all.
func openNote(signed []byte, v note.Verifier) (*note.Note, error) {
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		return nil, err
	}
	canon := n.Text + "\n"
	for _, s := range append(n.Sigs, n.UnverifiedSigs...) {
		if _, err := base64.StdEncoding.Strict().DecodeString(s.Base64); err != nil {
			return nil, errors.New("non-canonical signature encoding")
		}
		canon += "— " + s.Name + " " + s.Base64 + "\n"
	}
	if canon != string(signed) {
		return nil, errors.New("non-canonical note")
	}
	return n, nil
}

// Checkpoint signs the current tree head, stores it in the checkpoints
// table and returns the signed note.
func (l *Log) Checkpoint() ([]byte, error) {
	ctx := context.Background()
	tx, err := l.db.BeginTx(ctx, nil) // immediate: no append in between
	if err != nil {
		return nil, fmt.Errorf("audit checkpoint: %w", err)
	}
	defer tx.Rollback()
	var c Checkpoint
	if err := tx.QueryRowContext(ctx, "SELECT size FROM tree WHERE id = 0").Scan(&c.Size); err != nil {
		return nil, fmt.Errorf("audit checkpoint: %w", err)
	}
	c.Hash, err = tlog.TreeHash(c.Size, storedHashes(ctx, tx))
	if err != nil {
		return nil, fmt.Errorf("audit checkpoint: %w", err)
	}
	signed, err := note.Sign(&note.Note{Text: c.text()}, l.signer)
	if err != nil {
		return nil, fmt.Errorf("audit checkpoint: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO checkpoints (size, hash, signed, time) VALUES (?, ?, ?, ?)",
		c.Size, c.Hash[:], signed, time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		return nil, fmt.Errorf("audit checkpoint: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("audit checkpoint: %w", err)
	}
	return signed, nil
}

// VerifyReport is what Verify found.
type VerifyReport struct {
	Entries     int64 // entry rows read
	TreeSize    int64 // size recorded in the tree table
	Checkpoints int   // signed checkpoints checked
	// Latest is the latest checkpoint, if any.
	Latest *Checkpoint
	// FirstBad is the index (seq) of the first entry that does not match,
	// or -1. Problem says why; both are also in the returned *TamperError.
	FirstBad int64
	Problem  string
}

// OK reports whether the log verified.
func (r *VerifyReport) OK() bool { return r.FirstBad < 0 && r.Problem == "" }

// TamperError is returned by Verify when the log does not match its
// hashes or its signed checkpoints. Entry is the index of the first entry
// that does not match (-1 when no single entry can be named, e.g. a
// forged checkpoint). ErrTampered matches it with errors.Is.
type TamperError struct {
	Entry  int64
	Reason string
}

// ErrTampered is matched by every *TamperError.
var ErrTampered = errors.New("audit log tampered")

func (e *TamperError) Error() string {
	if e.Entry < 0 {
		return "audit log does not verify: " + e.Reason
	}
	return fmt.Sprintf("audit log does not verify: entry %d: %s", e.Entry, e.Reason)
}

func (e *TamperError) Is(target error) bool { return target == ErrTampered }

// Verify re-reads every entry, recomputes its leaf hash and the tree, and
// compares them with the stored hashes, the recorded tree size and every
// signed checkpoint (whose signatures it checks with the log's key). It
// returns a *TamperError naming the first entry that does not match, with
// the report; other errors (I/O, a closed log) are returned as they are.
func (l *Log) Verify(ctx context.Context) (*VerifyReport, error) {
	return l.verify(ctx, nil)
}

// VerifyCheckpoint is Verify, also checking the log against signed, a
// checkpoint kept elsewhere (the copy in the database could have been
// removed together with the entries it covers).
func (l *Log) VerifyCheckpoint(ctx context.Context, signed []byte) (*VerifyReport, error) {
	return l.verify(ctx, signed)
}

func (l *Log) verify(ctx context.Context, extra []byte) (*VerifyReport, error) {
	rep := &VerifyReport{FirstBad: -1}
	fail := func(entry int64, format string, args ...any) (*VerifyReport, error) {
		rep.FirstBad = entry
		rep.Problem = fmt.Sprintf(format, args...)
		return rep, &TamperError{Entry: entry, Reason: rep.Problem}
	}
	// One read transaction: a consistent snapshot while Record goes on.
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("audit verify: %w", err)
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, "SELECT size FROM tree WHERE id = 0").Scan(&rep.TreeSize); err != nil {
		return nil, fmt.Errorf("audit verify: %w", err)
	}
	// The stored hashes, by index.
	stored := map[int64][]byte{}
	hrows, err := tx.QueryContext(ctx, "SELECT idx, hash FROM hashes")
	if err != nil {
		return nil, fmt.Errorf("audit verify: %w", err)
	}
	for hrows.Next() {
		var i int64
		var b []byte
		if err := hrows.Scan(&i, &b); err != nil {
			hrows.Close()
			return nil, fmt.Errorf("audit verify: %w", err)
		}
		stored[i] = b
	}
	if err := hrows.Err(); err != nil {
		return nil, fmt.Errorf("audit verify: %w", err)
	}
	hrows.Close()

	// Recompute the tree from the entry rows alone.
	var hashes []tlog.Hash
	reader := computedHashes(&hashes)
	rows, err := tx.QueryContext(ctx, `SELECT `+entryColumns+` FROM entries ORDER BY idx`)
	if err != nil {
		return nil, fmt.Errorf("audit verify: %w", err)
	}
	defer rows.Close()
	var n int64
	for rows.Next() {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("audit verify: %w", err)
		}
		var e Entry
		if err := scanEntry(rows, &e); err != nil {
			return nil, fmt.Errorf("audit verify: %w", err)
		}
		rep.Entries = n + 1
		if e.Seq != n {
			return fail(n, "missing (the next entry row has seq %d): deleted or renumbered", e.Seq)
		}
		if n >= rep.TreeSize {
			return fail(n, "not in the tree (the tree has %d entries): inserted behind the log's back", rep.TreeSize)
		}
		hs, err := tlog.StoredHashes(n, e.canonical(), reader)
		if err != nil {
			return nil, fmt.Errorf("audit verify: %w", err)
		}
		base := tlog.StoredHashCount(n)
		if int64(len(hashes)) != base {
			return nil, fmt.Errorf("audit verify: internal: %d hashes for %d entries", len(hashes), n)
		}
		hashes = append(hashes, hs...)
		if b := stored[tlog.StoredHashIndex(0, n)]; !bytes.Equal(b, hs[0][:]) {
			return fail(n, "does not match its leaf hash: changed, reordered or replaced")
		}
		for i, h := range hs[1:] {
			if b := stored[base+1+int64(i)]; !bytes.Equal(b, h[:]) {
				return fail(n, "the stored tree hash %d it completes does not match: the hashes table was changed", base+1+int64(i))
			}
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit verify: %w", err)
	}
	rows.Close()
	rep.Entries = n
	if n < rep.TreeSize {
		return fail(n, "missing (the tree has %d entries, only %d rows remain): deleted", rep.TreeSize, n)
	}
	if want := tlog.StoredHashCount(n); int64(len(stored)) != want {
		return fail(-1, "%d stored hashes for %d entries, want %d: the hashes table was changed", len(stored), n, want)
	}

	// The signed checkpoints, oldest first.
	var signed [][]byte
	crows, err := tx.QueryContext(ctx, "SELECT signed FROM checkpoints ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("audit verify: %w", err)
	}
	for crows.Next() {
		var b []byte
		if err := crows.Scan(&b); err != nil {
			crows.Close()
			return nil, fmt.Errorf("audit verify: %w", err)
		}
		signed = append(signed, b)
	}
	if err := crows.Err(); err != nil {
		return nil, fmt.Errorf("audit verify: %w", err)
	}
	crows.Close()
	if extra != nil {
		signed = append(signed, extra)
	}
	var good int64 // entries [0, good) match a checkpoint
	for k, s := range signed {
		name := fmt.Sprintf("checkpoint %d", k+1)
		if extra != nil && k == len(signed)-1 {
			name = "the given checkpoint"
		}
		c, err := openCheckpoint(s, l.verif)
		if err != nil {
			return fail(-1, "%s: %v", name, err)
		}
		rep.Checkpoints++
		cc := c
		rep.Latest = &cc
		if c.Size > n {
			return fail(n, "missing: %s covers %d entries, the log has %d", name, c.Size, n)
		}
		h, err := tlog.TreeHash(c.Size, reader)
		if err != nil {
			return nil, fmt.Errorf("audit verify: %w", err)
		}
		if h != c.Hash {
			if c.Size > good {
				// The rows agree with the stored hashes, so both were
				// rewritten; the earlier checkpoints bound where.
				return fail(good, "differs from what %s signed (some entry in [%d, %d) was changed and the hashes rewritten to match)", name, good, c.Size)
			}
			return fail(-1, "%s signs a tree of %d entries whose root differs, though a later checkpoint covers them", name, c.Size)
		}
		good = max(good, c.Size)
	}
	return rep, nil
}

// storedHashes reads the tree's stored hashes in tx, by index.
func storedHashes(ctx context.Context, tx *sql.Tx) tlog.HashReader {
	return tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			var b []byte
			if err := tx.QueryRowContext(ctx, "SELECT hash FROM hashes WHERE idx = ?", x).Scan(&b); err != nil {
				return nil, fmt.Errorf("stored hash %d: %w", x, err)
			}
			if len(b) != tlog.HashSize {
				return nil, fmt.Errorf("stored hash %d: %d bytes", x, len(b))
			}
			copy(out[i][:], b)
		}
		return out, nil
	})
}

// computedHashes reads the stored hashes computed so far into *hashes
// (tlog.StoredHashes appends them as each entry is hashed).
func computedHashes(hashes *[]tlog.Hash) tlog.HashReader {
	return tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			if x < 0 || x >= int64(len(*hashes)) {
				return nil, fmt.Errorf("hash %d not computed", x)
			}
			out[i] = (*hashes)[x]
		}
		return out, nil
	})
}
