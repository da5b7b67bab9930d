package agent

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// Reference is a blob a tool hands back by name instead of by value: the
// model is shown {"ref":"$name"}, never the bytes, and may pass "$name"
// to a later tool, which receives the blob's handle (a BlobRef argument,
// or Ctx.Ref) and splices it into a request (abi.HTTPRequest.Splice,
// BodyBlob, abi.ChatRequest.Splice) without this task reading it. A
// Reference may be a tool's whole result or any part of it (a field, an
// element); each one the loop encodes is added to its table of
// references.
type Reference struct{ e *refEntry }

type refEntry struct {
	name string // "$name": requested by Ref, then the one the table gave it
	blob mandate.Blob
}

// Ref names b as a reference for the model. name is what the model is
// shown, with a "$" put in front if it has none (Ref("passport", b) shows
// "$passport"); characters outside [A-Za-z0-9_.-] become "_", and a name
// already naming another blob gets a suffix ("$passport_2"). Reading b
// (b.Bytes) would raise this task's label to b's: tools that receive a
// reference should splice it, not read it.
func Ref(name string, b mandate.Blob) Reference {
	return Reference{&refEntry{name: refNameOf(name), blob: b}}
}

// Name is the reference's "$name": the one the model was shown once the
// loop has encoded it.
func (r Reference) Name() string {
	if r.e == nil {
		return ""
	}
	return r.e.name
}

// Blob is the referenced blob.
func (r Reference) Blob() mandate.Blob {
	if r.e == nil {
		return mandate.Blob{}
	}
	return r.e.blob
}

// MarshalJSON encodes {"ref":"$name"}; inside the loop, it also adds the
// reference to the loop's table (naming it uniquely first).
func (r Reference) MarshalJSON() ([]byte, error) {
	if r.e == nil || r.e.blob.IsZero() {
		return nil, fmt.Errorf("agent: a reference to no blob")
	}
	if t := codec.refs; t != nil {
		if err := t.add(r.e); err != nil {
			return nil, err
		}
	}
	return json.Marshal(map[string]string{"ref": r.e.name})
}

// BlobRef is a tool argument naming a reference: the model writes "$name"
// (or {"ref":"$name"}, as it was shown), and the tool receives the
// blob's handle, never its bytes: splice it (Blob().Handle() in a
// request's Splice or BodyBlob), do not read it. An argument naming no
// reference the loop holds is a tool error the model sees. Decoded
// outside the loop (by json.Unmarshal) only the name is kept.
//
// The answer to a request that splices the blob carries the blob's label
// (the kernel's rule: a server may echo what it was sent); return it by
// reference too (Ref) rather than read it.
type BlobRef struct {
	name string
	blob mandate.Blob
}

// Name is the "$name" the model wrote.
func (r BlobRef) Name() string { return r.name }

// Blob is the referenced blob; the zero Blob when unresolved.
func (r BlobRef) Blob() mandate.Blob { return r.blob }

// Handle is the blob's handle, to splice.
func (r BlobRef) Handle() abi.Handle { return r.blob.Handle() }

// UnmarshalJSON reads "$name" or {"ref":"$name"}.
func (r *BlobRef) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	name, ok := refName(v)
	if !ok {
		return fmt.Errorf(`agent: a reference is "$name", not %s`, kindOf(v))
	}
	r.name, r.blob = name, mandate.Blob{}
	if t := codec.refs; t != nil {
		blob, ok := t.get(name)
		if !ok {
			return t.unknown(name)
		}
		r.blob = blob
	}
	return nil
}

// MarshalJSON writes the name.
func (r BlobRef) MarshalJSON() ([]byte, error) { return json.Marshal(r.name) }

// codec is the table that Reference.MarshalJSON and BlobRef.UnmarshalJSON
// use while the loop encodes a result or decodes arguments; nil
// otherwise. The lock makes loops on several goroutines (host tests)
// safe; a guest has one thread.
var codec struct {
	sync.Mutex
	refs *refTable
}

func withCodec(t *refTable, f func() error) error {
	codec.Lock()
	defer codec.Unlock()
	codec.refs = t
	defer func() { codec.refs = nil }()
	return f()
}

// MaxRefs bounds the references one run holds.
const MaxRefs = 1024

// refTable maps "$name" to a blob, for one run.
type refTable struct {
	byName map[string]mandate.Blob
	names  []string // in order of addition
}

func newRefTable() *refTable { return &refTable{byName: map[string]mandate.Blob{}} }

func (t *refTable) get(name string) (mandate.Blob, bool) {
	b, ok := t.byName[name]
	return b, ok
}

// add names e uniquely and records it; the same blob under the same name
// again is the same reference.
func (t *refTable) add(e *refEntry) error {
	if b, ok := t.byName[e.name]; ok && b.Handle() == e.blob.Handle() {
		return nil
	}
	base := e.name
	for i := 2; ; i++ {
		if _, taken := t.byName[e.name]; !taken {
			break
		}
		e.name = base + "_" + strconv.Itoa(i)
	}
	if len(t.names) >= MaxRefs {
		return fmt.Errorf("agent: more than %d references", MaxRefs)
	}
	t.byName[e.name] = e.blob
	t.names = append(t.names, e.name)
	return nil
}

func (t *refTable) unknown(name string) error {
	if len(t.names) == 0 {
		return fmt.Errorf("unknown reference %q (no tool has returned a reference)", truncate(name, 80))
	}
	known := append([]string(nil), t.names...)
	sort.Strings(known)
	if len(known) > 20 {
		known = append(known[:20], "...")
	}
	return fmt.Errorf("unknown reference %q (references: %s)", truncate(name, 80), strings.Join(known, ", "))
}

// refNameOf makes name a reference name: "$" then at most 64 of
// [A-Za-z0-9_.-].
func refNameOf(name string) string {
	name = strings.TrimPrefix(name, "$")
	var b strings.Builder
	b.WriteByte('$')
	for i, r := range name {
		if i >= 64 {
			break
		}
		if r == '_' || r == '.' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 1 {
		b.WriteString("ref")
	}
	return b.String()
}
