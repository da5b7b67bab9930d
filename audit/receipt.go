package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
)

// A receipt is a signed statement of what a run was allowed to do: the
// module it ran, the manifest, the principal, every capability granted
// (scope, constraints), the tasks' final labels and clearances, and the
// audit log's signed checkpoint after the run. It is signed with the same
// key as the log's checkpoints, so anyone with the verifier key can check
// it offline (OpenReceipt); one changed byte fails.
type Receipt struct {
	Version        int             `json:"version"`
	Run            string          `json:"run"`
	Manifest       string          `json:"manifest"`
	ManifestDigest string          `json:"manifest_digest"`
	Module         string          `json:"module"`
	Principal      string          `json:"principal"`
	Grants         []ReceiptGrant  `json:"grants"`
	Tasks          []ReceiptTask   `json:"tasks"`
	Checkpoint     string          `json:"checkpoint"` // the signed note, as text
	Extra          json.RawMessage `json:"extra,omitempty"`
	// Build is how the module was built, as its "mandate.build" custom
	// section records it (a module mandate build wrote; absent for any
	// other): the JSON of internal/guestbuild's Record, copied from the
	// module the digest Module names. Version 2 and later.
	Build json.RawMessage `json:"build,omitempty"`
}

// ReceiptGrant is one capability granted to the root task.
type ReceiptGrant struct {
	Name        string          `json:"name"`
	Kind        string          `json:"kind"`
	Scope       json.RawMessage `json:"scope"`
	When        []string        `json:"when,omitempty"`
	ApproveWhen []string        `json:"approve_when,omitempty"`
	Rate        string          `json:"rate,omitempty"`
	Audited     bool            `json:"audited"`
}

// ReceiptTask is one task of the run as it ended.
type ReceiptTask struct {
	ID        string          `json:"id"`
	Parent    string          `json:"parent,omitempty"`
	Module    string          `json:"module"`
	State     string          `json:"state"`
	Label     json.RawMessage `json:"label"`
	Clearance json.RawMessage `json:"clearance"`
}

// ReceiptVersion is the version SignReceipt writes. Version 2 added Build;
// OpenReceipt reads version 1 too.
const ReceiptVersion = 2

// SignReceipt signs r with the log's key. The result is a note: the
// receipt's JSON, then the signature line.
func (l *Log) SignReceipt(r Receipt) ([]byte, error) {
	r.Version = ReceiptVersion
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	// JSON strings are made valid UTF-8 by the encoder, but raw scopes
	// pass through as they are, and a note is text: refuse rather than
	// sign a receipt nobody could open.
	if !utf8.Valid(b) {
		return nil, errors.New("receipt: a scope or extra field is not valid UTF-8")
	}
	return note.Sign(&note.Note{Text: string(b) + "\n"}, l.signer)
}

// OpenReceipt checks a signed receipt with the verifier key vkey (and the
// checkpoint it carries), byte for byte, and returns it.
func OpenReceipt(signed []byte, vkey string) (Receipt, error) {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return Receipt{}, fmt.Errorf("receipt: verifier key: %w", err)
	}
	n, err := openNote(signed, v)
	if err != nil {
		return Receipt{}, fmt.Errorf("receipt: %w", err)
	}
	r, err := decodeReceipt([]byte(n.Text))
	if err != nil {
		return Receipt{}, err
	}
	if err := checkReceipt(r, vkey); err != nil {
		return Receipt{}, err
	}
	return r, nil
}

// decodeReceipt decodes a receipt's JSON, refusing a field it does not
// know.
func decodeReceipt(b []byte) (Receipt, error) {
	var r Receipt
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Receipt{}, fmt.Errorf("receipt: %w", err)
	}
	return r, nil
}

// checkReceipt checks what a receipt's signature does not: its version,
// that a version 1 receipt has no build record, and the audit checkpoint
// it carries, with vkey.
func checkReceipt(r Receipt, vkey string) error {
	if r.Version < 1 || r.Version > ReceiptVersion {
		return fmt.Errorf("receipt: unknown version %d", r.Version)
	}
	if r.Version == 1 && len(r.Build) > 0 {
		return errors.New("receipt: a version 1 receipt has no build record")
	}
	if r.Checkpoint != "" {
		v, err := note.NewVerifier(vkey)
		if err != nil {
			return fmt.Errorf("receipt: verifier key: %w", err)
		}
		if _, err := openCheckpoint([]byte(r.Checkpoint), v); err != nil {
			return fmt.Errorf("receipt: its %w", err)
		}
	}
	return nil
}
