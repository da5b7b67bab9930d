package kindapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// Parts of blobs: labels by field, and splicing by reference.
//
// A kind may label the parts of a result differently (Result.Parts): a
// bank's record of who sent a transaction is its own, the free text of the
// transaction is whoever wrote it. The parts are named by paths into the
// blob's JSON document (the blob itself when it is JSON, the body of an
// HTTP response blob otherwise): "$.transactions[*].sender". A task that
// reads the blob reads every part, so its label rises by all of them
// (Blob.Label); a task that splices one part into a call by reference
// (Call.BlobPart), never reading it, passes on only that part's label
// (Blob.PartLabel), and the kernel records where the value came from, for
// constraints (Op.Provenance, the CEL functions spliced and from).

// MaxPathLen bounds a path's text; MaxPathDepth its elements.
const (
	MaxPathLen   = 512
	MaxPathDepth = 32
	// MaxParts bounds the part labels of one result.
	MaxParts = 64
)

// Path is a parsed path into a JSON document: member names and array
// indexes; in a pattern, Any matches every index or member.
type Path []PathElem

// PathElem is one step of a Path: a member (Key), an index (Index >= 0),
// or, in a pattern, any (Any).
type PathElem struct {
	Key   string
	Index int
	Any   bool
	isKey bool
}

// badNameChars may not be in a member name of a path (so every path
// prints as one ParsePath reads back).
const badNameChars = `'"\\[]`

// ParsePath parses "$", then any of ".name", "['name']" / "[\"name\"]",
// "[N]" and, when pattern is set, "[*]" and ".*".
func ParsePath(s string, pattern bool) (Path, error) {
	bad := func(msg string) (Path, error) { return nil, fmt.Errorf("path %q: %s", s, msg) }
	if len(s) > MaxPathLen {
		return bad(fmt.Sprintf("longer than %d bytes", MaxPathLen))
	}
	if !strings.HasPrefix(s, "$") {
		return bad(`must start with "$"`)
	}
	var p Path
	rest := s[1:]
	for rest != "" {
		if len(p) == MaxPathDepth {
			return bad(fmt.Sprintf("deeper than %d", MaxPathDepth))
		}
		switch rest[0] {
		case '.':
			rest = rest[1:]
			n := strings.IndexAny(rest, ".[")
			if n < 0 {
				n = len(rest)
			}
			name := rest[:n]
			rest = rest[n:]
			switch {
			case name == "*" && pattern:
				p = append(p, PathElem{Any: true})
			case name == "" || name == "*":
				return bad("an empty or wildcard member name")
			case strings.ContainsAny(name, badNameChars):
				return bad("a member name with quotes, backslashes or brackets")
			default:
				p = append(p, PathElem{Key: name, isKey: true})
			}
		case '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return bad("unterminated [")
			}
			in := rest[1:end]
			rest = rest[end+1:]
			switch {
			case in == "*" && pattern:
				p = append(p, PathElem{Any: true})
			case len(in) >= 2 && (in[0] == '\'' || in[0] == '"') && in[len(in)-1] == in[0]:
				name := in[1 : len(in)-1]
				if name == "" || strings.ContainsAny(name, badNameChars) {
					return bad("a member name that is empty or has quotes, backslashes or brackets")
				}
				p = append(p, PathElem{Key: name, isKey: true})
			default:
				n, err := strconv.Atoi(in)
				if err != nil || n < 0 || strconv.Itoa(n) != in {
					return bad(fmt.Sprintf("index %q is not a non-negative integer", in))
				}
				p = append(p, PathElem{Index: n})
			}
		default:
			return bad(fmt.Sprintf("unexpected %q", rest[0]))
		}
	}
	return p, nil
}

// String is p in the form ParsePath reads.
func (p Path) String() string {
	var b strings.Builder
	b.WriteString("$")
	for _, e := range p {
		switch {
		case e.Any:
			b.WriteString("[*]")
		case e.isKey && isPlainName(e.Key):
			b.WriteString("." + e.Key)
		case e.isKey:
			b.WriteString(`["` + e.Key + `"]`)
		default:
			b.WriteString("[" + strconv.Itoa(e.Index) + "]")
		}
	}
	return b.String()
}

func isPlainName(s string) bool {
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// matchesPrefix reports whether the pattern matches the first len(pat)
// elements of p.
func (pat Path) matchesPrefix(p Path) bool {
	if len(pat) > len(p) {
		return false
	}
	for i, e := range pat {
		x := p[i]
		switch {
		case e.Any:
		case e.isKey != x.isKey || x.Any:
			return false
		case e.isKey && e.Key != x.Key:
			return false
		case !e.isKey && e.Index != x.Index:
			return false
		}
	}
	return true
}

// Extract returns the JSON value at p in doc, compacted. doc must be a
// document abi.CheckJSON accepts: with a key given twice (compared after
// unescaping) encoding/json would read the last value where another
// reader, or whoever labelled the parts, reads the first, and an invalid
// UTF-8 string or lone surrogate would be read as U+FFFD. The error then
// says why.
func (p Path) Extract(doc []byte) ([]byte, error) {
	if err := abi.CheckJSON(doc); err != nil {
		return nil, fmt.Errorf("%s: the document is not one every reader reads alike: %v", p, err)
	}
	cur := json.RawMessage(doc)
	for i, e := range p {
		if e.Any {
			return nil, fmt.Errorf("%s: a pattern names no single value", p)
		}
		if e.isKey {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(cur, &m); err != nil {
				return nil, fmt.Errorf("%s: %s is not an object", p, p[:i])
			}
			v, ok := m[e.Key]
			if !ok {
				return nil, fmt.Errorf("%s: no member %q", p, e.Key)
			}
			cur = v
			continue
		}
		var a []json.RawMessage
		if err := json.Unmarshal(cur, &a); err != nil {
			return nil, fmt.Errorf("%s: %s is not an array", p, p[:i])
		}
		if e.Index >= len(a) {
			return nil, fmt.Errorf("%s: index %d past the %d elements", p, e.Index, len(a))
		}
		cur = a[e.Index]
	}
	var out bytes.Buffer
	if err := json.Compact(&out, cur); err != nil {
		return nil, fmt.Errorf("%s: %v", p, err)
	}
	return out.Bytes(), nil
}

// PartLabel labels the parts of a result's JSON document that Pattern
// matches (every index and member a wildcard stands for).
type PartLabel struct {
	Pattern string
	Label   Label
}

type partLabel struct {
	pattern Path
	label   Label
}

// parseParts parses part patterns.
func parseParts(parts []PartLabel) ([]partLabel, error) {
	if len(parts) > MaxParts {
		return nil, fmt.Errorf("%d part labels (at most %d)", len(parts), MaxParts)
	}
	out := make([]partLabel, 0, len(parts))
	for _, pl := range parts {
		p, err := ParsePath(pl.Pattern, true)
		if err != nil {
			return nil, err
		}
		out = append(out, partLabel{pattern: p, label: pl.Label})
	}
	return out, nil
}

// NewBlobParts makes a blob owning data (as NewBlobOwned) whose parts
// carry their own labels: base labels everything no part names, and the
// blob as a whole (Label) carries base and every part's label.
func NewBlobParts(data []byte, base Label, parts []PartLabel) (*Blob, error) {
	ps, err := parseParts(parts)
	if err != nil {
		return nil, err
	}
	b := NewBlobOwned(data, base)
	if len(ps) == 0 {
		return b, nil
	}
	b.base, b.parts = base, ps
	for _, p := range ps {
		b.label = b.label.Join(p.label)
	}
	return b, nil
}

// PartLabel is the label of the part of b's JSON document at p: the label
// of the last part pattern that matches p or a path above it (p is inside
// that part), joined with the labels of every part inside p, over the
// blob's base label; b's Label when it has no part labels.
func (b *Blob) PartLabel(p Path) Label {
	if b.parts == nil {
		return b.label
	}
	l := b.base
	for _, pl := range b.parts {
		switch {
		case pl.pattern.matchesPrefix(p):
			// p is in this part (or is it): the part's label, instead of
			// the base's, is what p's value carries.
			l = pl.label
		}
	}
	for _, pl := range b.parts {
		if len(pl.pattern) > len(p) && p.isPrefixOf(pl.pattern) {
			l = l.Join(pl.label) // a labelled part inside p
		}
	}
	return l
}

// isPrefixOf reports whether p could be a prefix of the pattern: p's
// elements, concrete, each matched by the pattern's.
func (p Path) isPrefixOf(pat Path) bool { return pat[:len(p)].matchesPrefix(p) }

// JSONDocument is b's JSON document: b itself when it is JSON, the body of
// an HTTP response blob (a net fetch's result) otherwise.
func (b *Blob) JSONDocument() ([]byte, error) {
	if json.Valid(b.data) {
		return b.data, nil
	}
	if resp, err := abi.DecodeHTTPResponse(b.data); err == nil && json.Valid(resp.Body) {
		return resp.Body, nil
	}
	return nil, Errorf(abi.EINVAL, "the blob is not a JSON document (nor an HTTP response with a JSON body)")
}

// Source is where a value of a call came from, for constraints
// (Op.Provenance): the label of the part it was spliced from, its path in
// that blob's JSON document and the pattern that chose it in a text (""
// for none). Written says the blob was one a task wrote (blob_create), or
// a part of one: its bytes are the task's own, whatever their label, so
// the kernel does not count such a value as spliced from anywhere.
type Source struct {
	Label   Label
	Path    string
	Pattern string
	Written bool
}

// BlobPart resolves blob h, named in the call's arguments, and returns a
// blob of the JSON value at path in its JSON document (compacted), labelled
// with that part's label (Blob.PartLabel): what the kind splices in place
// of the whole blob. The part, not the blob, is what the kernel then checks
// may flow to the call's sink, and what the result carries.
func (c *Call) BlobPart(h abi.Handle, path string) (*Blob, error) {
	return c.BlobPartOf(abi.SplicePart{Blob: h, Path: path})
}

// BlobPartOf is BlobPart of a part named by a path, a pattern or both
// (abi.SplicePart, Blob.Part). A pattern's run raises the calling task's
// label by the confidentiality tags of the text it scanned, matched or
// not (see pattern.go).
func (c *Call) BlobPartOf(sp abi.SplicePart) (*Blob, error) {
	if c.blob == nil {
		return nil, ErrBadHandle
	}
	if sp.Path != "" {
		if _, err := ParsePath(sp.Path, false); err != nil {
			return nil, Errorf(abi.EINVAL, "%v", err)
		}
	}
	b, err := c.blob(sp.Blob)
	if err != nil {
		return nil, err
	}
	if len(c.spliced) >= MaxSpliced {
		return nil, Errorf(abi.ELIMIT, "a call may splice at most %d blobs", MaxSpliced)
	}
	part, revealed, err := b.Part(sp.Path, sp.Pattern)
	if !revealed.IsZero() && c.reveal != nil {
		c.reveal(revealed)
	}
	if err != nil {
		return nil, err
	}
	c.spliced = append(c.spliced, part)
	return part, nil
}
