package audit

import (
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
)

// VerifyEntries checks a copy of a log held elsewhere (a fleet's replicated
// stream): entries must be the log's from seq 0 on, without a gap, and the
// signed checkpoint, checked with the verifier key vkey, must be the tree
// head of its first Size entries. It returns the checkpoint. Entries past
// the checkpoint are not covered by it (the caller says so).
func VerifyEntries(entries []Entry, signed []byte, vkey string) (Checkpoint, error) {
	c, err := OpenCheckpoint(signed, vkey)
	if err != nil {
		return Checkpoint{}, err
	}
	if c.Size > int64(len(entries)) {
		return c, fmt.Errorf("audit: the checkpoint covers %d entries, %d are here", c.Size, len(entries))
	}
	var hashes []tlog.Hash
	reader := computedHashes(&hashes)
	for n := int64(0); n < c.Size; n++ {
		e := entries[n]
		if e.Seq != n {
			return c, &TamperError{Entry: n, Reason: fmt.Sprintf("missing (the next entry has seq %d)", e.Seq)}
		}
		hs, err := tlog.StoredHashes(n, e.canonical(), reader)
		if err != nil {
			return c, fmt.Errorf("audit: %w", err)
		}
		hashes = append(hashes, hs...)
	}
	h, err := tlog.TreeHash(c.Size, reader)
	if err != nil {
		return c, fmt.Errorf("audit: %w", err)
	}
	if h != c.Hash {
		return c, &TamperError{Entry: -1, Reason: fmt.Sprintf("the %d entries do not hash to the signed checkpoint", c.Size)}
	}
	return c, nil
}
