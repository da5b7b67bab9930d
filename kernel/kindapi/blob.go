package kindapi

import (
	"bytes"
	"io"
	"sync/atomic"
)

// Blob is an immutable byte string held by the kernel, with a label. Guests
// name blobs by handle; results of calls come back as blobs.
//
// The bytes are never exposed for writing: readers get copies or an
// io.Reader.
type Blob struct {
	id    uint64
	data  []byte
	label Label
	// base and parts label the parts of its JSON document (NewBlobParts);
	// nil parts: the whole blob is label.
	base  Label
	parts []partLabel
	// written: a task wrote these bytes (blob_create), or they are a
	// part of such a blob. A part spliced from it proves nothing about
	// where its value came from (Source.Written).
	written bool
}

var blobIDs atomic.Uint64

// NewBlob makes a blob of a copy of data.
func NewBlob(data []byte, label Label) *Blob {
	return NewBlobOwned(bytes.Clone(data), label)
}

// NewBlobOwned makes a blob that takes ownership of data: the caller must
// not change data afterwards. (The kernel makes result blobs this way; a
// blob only reaches a task through the kernel.)
func NewBlobOwned(data []byte, label Label) *Blob {
	return &Blob{id: blobIDs.Add(1), data: data, label: label}
}

// Relabeled returns a new blob (a new ID) of the same bytes, shared, not
// copied (a blob is immutable), labelled label: the parts' labels are
// not carried over.
func (b *Blob) Relabeled(label Label) *Blob {
	r := NewBlobOwned(b.data, label)
	r.written = b.written
	return r
}

// NewBlobWritten makes a blob of bytes a task wrote (blob_create), owning
// data as NewBlobOwned: its parts are the task's text, whatever its label.
func NewBlobWritten(data []byte, label Label) *Blob {
	b := NewBlobOwned(data, label)
	b.written = true
	return b
}

// Written reports whether a task wrote b's bytes (NewBlobWritten), or b is
// a part of such a blob.
func (b *Blob) Written() bool { return b.written }

// ID is unique within the process.
func (b *Blob) ID() uint64 { return b.id }

// Len is the blob's size in bytes.
func (b *Blob) Len() int { return len(b.data) }

// Label is the blob's label.
func (b *Blob) Label() Label { return b.label }

// ReadAt implements io.ReaderAt.
func (b *Blob) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(b.data)) {
		return 0, io.EOF
	}
	n := copy(p, b.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Reader returns a reader over the blob's bytes.
func (b *Blob) Reader() *bytes.Reader { return bytes.NewReader(b.data) }

// Bytes returns a copy of the blob's bytes.
func (b *Blob) Bytes() []byte { return bytes.Clone(b.data) }
