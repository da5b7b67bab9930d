package abi

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// Argument documents (cap_call arguments, cap_derive requests) are JSON
// objects of at most MaxArgLen bytes. Each kind documents its own in ABI.md.
// The structures below are the ones the net kind uses; they live here so the
// kernel side and the guest SDK share one definition.

// Limits on decoded HTTP structures.
const (
	MaxHeaders        = 128
	MaxHeaderBytes    = 64 << 10 // names and values together
	MaxURLLen         = 8 << 10
	MaxMethodLen      = 16
	httpResponseMagic = "MHR1"
)

// NetFetchOp is the net kind's only operation.
const NetFetchOp = "fetch"

// HTTPRequest is the argument of the net kind's "fetch" operation.
//
// URL is either a path (with optional query), resolved against the
// capability's origin, or an absolute URL, which must name that origin.
// At most one of Body and BodyBlob is set; BodyBlob names a blob handle in
// the caller's table whose bytes become the body without passing through the
// guest.
//
// Splice names blobs to substitute into URL, header values and Body where
// the placeholder SplicePlaceholder(i) stands (in the URL, query-escaped):
// the kernel splices them in without the guest reading them, after
// checking each one may flow to the capability's sink.
type HTTPRequest struct {
	Method   string              `json:"method"`
	URL      string              `json:"url"`
	Header   map[string][]string `json:"header,omitempty"`
	Body     []byte              `json:"body,omitempty"`
	BodyBlob Handle              `json:"body_blob,omitempty"`
	Splice   []Handle            `json:"splice,omitempty"`
	// SpliceParts names parts of blobs, each a JSON path into a blob's
	// JSON document (the blob, or the JSON body of a fetched response), to
	// put into a JSON Body where a string value is exactly
	// PartPlaceholder(i): the kernel extracts the value, never the guest,
	// and it replaces the whole string as a JSON value (so it cannot break
	// out of its field). What flows, and what the result carries, is the
	// part's own label (a kind may label a response's fields apart), and
	// constraints can ask where the value came from: spliced(...), from(...).
	// A body splicing parts splices no whole blob.
	SpliceParts []SplicePart `json:"splice_parts,omitempty"`
}

// SplicePart is one part of a blob spliced by reference: Blob is a handle
// in the caller's table, Path a JSON path into its document, such as
// "$.transactions[0].sender" (members as .name or ["name"], indexes [N]).
//
// Pattern, when set, chooses a part of a text: a regular expression (RE2
// syntax, as Go's regexp; at most MaxPatternLen bytes) with exactly one
// capture group, run over the string at Path (which must be a JSON
// string), or, with Path "", over the blob's text (the blob's bytes; the
// body of a fetched response). The part is the capture of its one match,
// as a JSON string: no match, or more than one, is EINVAL (an attacker
// who can write into the text can make the part fail, never choose
// another), and so is a capture that is not valid UTF-8. At most
// MaxPatternText bytes are scanned (ELIMIT above).
type SplicePart struct {
	Blob    Handle `json:"blob"`
	Path    string `json:"path"`
	Pattern string `json:"pattern,omitempty"`
}

// Bounds of a part's pattern (SplicePart.Pattern).
const (
	// MaxPatternLen bounds a pattern's text.
	MaxPatternLen = 256
	// MaxPatternText bounds the text one pattern scans.
	MaxPatternText = 1 << 20
)

// PartPlaceholder is the placeholder for the i-th spliced part:
// "{{mandate:part:i}}".
func PartPlaceholder(i int) string { return PartPrefix + itoa(uint32(i)) + "}}" }

// PartPrefix begins every part placeholder.
const PartPrefix = "{{mandate:part:"

// MaxSplice bounds the blobs one request splices.
const MaxSplice = 16

// SplicePlaceholder is the placeholder for the i-th spliced blob:
// "{{mandate:splice:i}}".
func SplicePlaceholder(i int) string { return "{{mandate:splice:" + itoa(uint32(i)) + "}}" }

// Errors returned by the decoders.
var (
	ErrTooLarge  = errors.New("abi: document too large")
	ErrMalformed = errors.New("abi: malformed document")
)

// DecodeJSON decodes a bounded, strict JSON argument document into v:
// unknown fields, trailing data and whatever CheckJSON refuses (duplicated
// keys, invalid UTF-8) are errors.
func DecodeJSON(b []byte, v any) error {
	if len(b) > MaxArgLen {
		return ErrTooLarge
	}
	if err := CheckJSON(b); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: trailing data", ErrMalformed)
	}
	return nil
}

// DecodeHTTPRequest decodes and bounds-checks a fetch argument.
func DecodeHTTPRequest(b []byte) (HTTPRequest, error) {
	var r HTTPRequest
	if err := DecodeJSON(b, &r); err != nil {
		return HTTPRequest{}, err
	}
	if len(r.Method) == 0 || len(r.Method) > MaxMethodLen {
		return HTTPRequest{}, fmt.Errorf("%w: method length %d", ErrMalformed, len(r.Method))
	}
	if len(r.URL) == 0 || len(r.URL) > MaxURLLen {
		return HTTPRequest{}, fmt.Errorf("%w: url length %d", ErrMalformed, len(r.URL))
	}
	if len(r.Body) > 0 && r.BodyBlob != 0 {
		return HTTPRequest{}, fmt.Errorf("%w: both body and body_blob set", ErrMalformed)
	}
	if err := checkHeader(r.Header); err != nil {
		return HTTPRequest{}, err
	}
	if len(r.Splice) > MaxSplice {
		return HTTPRequest{}, fmt.Errorf("%w: %d spliced blobs (max %d)", ErrTooLarge, len(r.Splice), MaxSplice)
	}
	if len(r.SpliceParts) > MaxSplice {
		return HTTPRequest{}, fmt.Errorf("%w: %d spliced parts (max %d)", ErrTooLarge, len(r.SpliceParts), MaxSplice)
	}
	return r, nil
}

// EncodeHTTPRequest encodes a fetch argument.
func EncodeHTTPRequest(r HTTPRequest) ([]byte, error) { return json.Marshal(r) }

func checkHeader(h map[string][]string) error {
	n, size := 0, 0
	for k, vs := range h {
		size += len(k)
		for _, v := range vs {
			n++
			size += len(v)
		}
		if len(vs) == 0 {
			n++
		}
	}
	if n > MaxHeaders {
		return fmt.Errorf("%w: %d header values (max %d)", ErrTooLarge, n, MaxHeaders)
	}
	if size > MaxHeaderBytes {
		return fmt.Errorf("%w: %d header bytes (max %d)", ErrTooLarge, size, MaxHeaderBytes)
	}
	return nil
}

// HTTPResponse is the content of the blob a successful fetch returns.
//
// Its encoding is binary so that a large body costs no more than its bytes:
//
//	"MHR1" status:uvarint nheader:uvarint { name:bytes value:bytes }* body:bytes
//
// where bytes is a uvarint length followed by that many bytes.
type HTTPResponse struct {
	Status int
	Header map[string][]string
	Body   []byte
}

// EncodeHTTPResponse encodes r. Header values are written sorted by name so
// that equal responses encode equally.
func EncodeHTTPResponse(r HTTPResponse) []byte {
	names := make([]string, 0, len(r.Header))
	n := 0
	for k, vs := range r.Header {
		names = append(names, k)
		n += len(vs)
	}
	sort.Strings(names)
	b := make([]byte, 0, len(httpResponseMagic)+16+len(r.Body))
	b = append(b, httpResponseMagic...)
	b = binary.AppendUvarint(b, uint64(r.Status))
	b = binary.AppendUvarint(b, uint64(n))
	for _, k := range names {
		for _, v := range r.Header[k] {
			b = appendBytes(b, k)
			b = appendBytes(b, v)
		}
	}
	b = appendBytes(b, string(r.Body))
	return b
}

func appendBytes(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// DecodeHTTPResponse decodes a fetch result blob. Every length is checked
// against what remains, so hostile input yields an error, never a panic or
// a large allocation.
func DecodeHTTPResponse(b []byte) (HTTPResponse, error) {
	if len(b) > MaxBlobLen {
		return HTTPResponse{}, ErrTooLarge
	}
	if !bytes.HasPrefix(b, []byte(httpResponseMagic)) {
		return HTTPResponse{}, fmt.Errorf("%w: bad magic", ErrMalformed)
	}
	d := decoder{b: b[len(httpResponseMagic):]}
	status := d.uvarint()
	n := d.uvarint()
	if d.err == nil && (status > 999 || n > MaxHeaders) {
		return HTTPResponse{}, fmt.Errorf("%w: status %d, %d headers", ErrMalformed, status, n)
	}
	r := HTTPResponse{Status: int(status), Header: make(map[string][]string, n)}
	for i := uint64(0); i < n && d.err == nil; i++ {
		k, v := d.bytes(), d.bytes()
		r.Header[string(k)] = append(r.Header[string(k)], string(v))
	}
	r.Body = d.bytes()
	if d.err != nil {
		return HTTPResponse{}, d.err
	}
	if len(d.b) != 0 {
		return HTTPResponse{}, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(d.b))
	}
	return r, nil
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = fmt.Errorf("%w: bad varint", ErrMalformed)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = fmt.Errorf("%w: length %d exceeds remaining %d", ErrMalformed, n, len(d.b))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// DecodeJSONNumber is DecodeJSON keeping numbers as json.Number, for
// documents whose numbers must not lose precision. It refuses what
// CheckJSON refuses, as DecodeJSON does.
func DecodeJSONNumber(b []byte, v any) error {
	if len(b) > MaxArgLen {
		return ErrTooLarge
	}
	if err := CheckJSON(b); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: trailing data", ErrMalformed)
	}
	return nil
}

// SpawnRequest is the argument of task_spawn: which module to run, what to
// pass, and within which limits. Every capability passed is derived anew
// for the child (narrowed by Narrow when given, else identical), so the
// parent can revoke it; blobs are passed as they are.
type SpawnRequest struct {
	// Module is the child's module digest ("sha256:<hex>"); the spawn
	// capability must allow it.
	Module string `json:"module"`
	// Input is a blob handle that becomes the child's input (0: none).
	Input Handle `json:"input,omitempty"`
	// Caps are the capabilities the child gets, under the names it looks
	// them up by.
	Caps []SpawnCap `json:"caps,omitempty"`
	// Memory and Timeout bound the child; absent or zero means the most
	// the parent may give (its own limits, within the spawn capability's).
	Memory  Size   `json:"memory,omitempty"`
	Timeout string `json:"timeout,omitempty"`
	// Clearance is the confidentiality tags the child may ever hold; nil
	// means the parent's clearance, an empty list public data only. It
	// must be within the parent's, and the parent's current label must
	// flow to it (a child starts at its parent's label).
	Clearance *[]string `json:"clearance,omitempty"`
}

// SpawnCap is one capability passed to a child.
type SpawnCap struct {
	Handle Handle          `json:"handle"`
	Name   string          `json:"name"`
	Narrow json.RawMessage `json:"narrow,omitempty"`
}

// MaxSpawnCaps bounds the capabilities passed in one spawn.
const MaxSpawnCaps = 64

// DecodeSpawnRequest decodes and bounds-checks a task_spawn argument.
func DecodeSpawnRequest(b []byte) (SpawnRequest, error) {
	var r SpawnRequest
	if err := DecodeJSON(b, &r); err != nil {
		return SpawnRequest{}, err
	}
	if r.Module == "" || len(r.Module) > 128 {
		return SpawnRequest{}, fmt.Errorf("%w: module digest", ErrMalformed)
	}
	if len(r.Caps) > MaxSpawnCaps {
		return SpawnRequest{}, fmt.Errorf("%w: %d capabilities passed (max %d)", ErrTooLarge, len(r.Caps), MaxSpawnCaps)
	}
	seen := map[string]bool{}
	for _, c := range r.Caps {
		if c.Name == "" || len(c.Name) > MaxNameLen || seen[c.Name] {
			return SpawnRequest{}, fmt.Errorf("%w: capability name %q empty, too long or repeated", ErrMalformed, c.Name)
		}
		seen[c.Name] = true
	}
	if r.Memory < 0 {
		return SpawnRequest{}, fmt.Errorf("%w: negative memory", ErrMalformed)
	}
	return r, nil
}
