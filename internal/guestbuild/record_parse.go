package guestbuild

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ParseRecord parses a record's JSON as ReadRecord does a section's body
// (a receipt carries a module's record this way): unknown fields, data
// after the record and anything a build does not write are errors.
func ParseRecord(body []byte) (Record, error) {
	if len(body) > maxRecord {
		return Record{}, fmt.Errorf("guestbuild: a build record of %d bytes (at most %d)", len(body), maxRecord)
	}
	r, err := parseRecord(body)
	if err != nil {
		return Record{}, fmt.Errorf("guestbuild: build record: %w", err)
	}
	return r, nil
}

// parseRecord is ParseRecord and ReadRecord's parse of a record's JSON.
func parseRecord(body []byte) (Record, error) {
	var r Record
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Record{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return Record{}, errors.New("data after the record")
	}
	if err := r.validate(); err != nil {
		return Record{}, err
	}
	return r, nil
}

// WithRecord is wasm with its records replaced by r's section, as a build
// appends it. A verifier with a module's record and a rebuild of its
// source checks with it whether the module is the rebuild's code under
// that record: the same digest means the compiler wrote the same bytes and
// the records differ only in what it never saw.
func WithRecord(wasm []byte, r Record) ([]byte, error) {
	code, err := StripRecord(wasm)
	if err != nil {
		return nil, err
	}
	return appendRecord(code, r)
}
