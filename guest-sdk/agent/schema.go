package agent

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

// The parameters of a tool are a JSON Schema derived from its Go argument
// type by a small reflector that follows encoding/json's rules (the names
// and fields json.Unmarshal uses). It is written here rather than taken
// from github.com/google/jsonschema-go (which builds for wasip1) because
// the guest SDK imports only the standard library, keeping guests small,
// and because the same tree validates the model's arguments (validate.go):
// what the model is told and what is enforced cannot drift apart.

// schema is one node of a derived JSON Schema.
type schema struct {
	typ      string // "", object, array, string, integer, number, boolean ("" = any value)
	nullable bool   // null is allowed too (pointers)
	desc     string
	format   string // date-time (time.Time), byte (base64 []byte)

	// Objects: a struct's properties (no others allowed), or a map's
	// values (extra).
	props    []prop
	required []string
	extra    *schema

	// Arrays.
	items    *schema
	fixedLen int // a Go array's length (minItems = maxItems); -1 for slices

	asString bool // a json ",string" field: the value is JSON inside a string
	ref      bool // a BlobRef: "$name" (or {"ref":"$name"})
	intBits  int  // integers: 8, 16, 32 or 64
	unsigned bool // integers: unsigned
}

type prop struct {
	name string
	s    *schema
}

func (s *schema) prop(name string) *schema {
	for _, p := range s.props {
		if p.name == name {
			return p.s
		}
	}
	return nil
}

var (
	typeBlobRef   = reflect.TypeFor[BlobRef]()
	typeReference = reflect.TypeFor[Reference]()
	typeBlob      = reflect.TypeFor[mandate.Blob]()
	typeCap       = reflect.TypeFor[mandate.Cap]()
	typeTime      = reflect.TypeFor[time.Time]()
	typeRaw       = reflect.TypeFor[json.RawMessage]()
	typeNumber    = reflect.TypeFor[json.Number]()
	typeJSONUnm   = reflect.TypeFor[json.Unmarshaler]()
	typeTextUnm   = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// refDescription is what the model is told about a BlobRef parameter.
const refDescription = `a reference: the "$name" a tool returned as {"ref":"$name"}`

// SchemaOf returns the JSON Schema of T as Tool derives a tool's
// parameters: structs are objects whose properties are the fields
// json.Unmarshal fills (named by their json tags, described by a
// `jsonschema:"..."` tag) with no other properties allowed; a field is
// required unless it is a pointer or tagged omitempty or omitzero;
// pointers may be null; slices and arrays are arrays, maps objects; a
// BlobRef is a string naming a reference. Types with no JSON form
// (channels, functions, complex numbers), recursive types, and
// mandate.Blob or mandate.Cap (a model cannot name a handle: use
// BlobRef) are errors.
func SchemaOf[T any]() (json.RawMessage, error) {
	s, err := deriveSchema(reflect.TypeFor[T]())
	if err != nil {
		return nil, err
	}
	return s.marshal(), nil
}

func deriveSchema(t reflect.Type) (*schema, error) {
	if t == nil {
		return nil, fmt.Errorf("agent: no type (an interface type argument?)")
	}
	s, err := (&reflector{seen: map[reflect.Type]bool{}}).of(t)
	if err != nil {
		return nil, fmt.Errorf("agent: schema of %s: %w", t, err)
	}
	return s, nil
}

type reflector struct {
	seen map[reflect.Type]bool // structs being derived (cycle detection)
}

func (r *reflector) of(t reflect.Type) (*schema, error) {
	nullable := false
	for t.Kind() == reflect.Pointer {
		nullable = true
		t = t.Elem()
	}
	s, err := r.base(t)
	if err != nil {
		return nil, err
	}
	s.nullable = s.nullable || nullable
	return s, nil
}

func (r *reflector) base(t reflect.Type) (*schema, error) {
	switch t {
	case typeBlobRef:
		return &schema{typ: "string", ref: true, desc: refDescription}, nil
	case typeReference:
		return nil, fmt.Errorf("agent.Reference is for results; an argument naming a reference is an agent.BlobRef")
	case typeBlob, typeCap:
		return nil, fmt.Errorf("%s: a model cannot name a handle; use agent.BlobRef for a reference", t)
	case typeTime:
		return &schema{typ: "string", format: "date-time"}, nil
	case typeRaw:
		return &schema{}, nil
	case typeNumber:
		return &schema{typ: "number"}, nil
	}
	// A type that decodes itself may take any value; one that decodes
	// from text, a string.
	if reflect.PointerTo(t).Implements(typeJSONUnm) || t.Implements(typeJSONUnm) {
		return &schema{}, nil
	}
	if reflect.PointerTo(t).Implements(typeTextUnm) || t.Implements(typeTextUnm) {
		return &schema{typ: "string"}, nil
	}
	switch t.Kind() {
	case reflect.Bool:
		return &schema{typ: "boolean"}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return &schema{typ: "integer", intBits: t.Bits()}, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return &schema{typ: "integer", intBits: t.Bits(), unsigned: true}, nil
	case reflect.Float32, reflect.Float64:
		return &schema{typ: "number"}, nil
	case reflect.String:
		return &schema{typ: "string"}, nil
	case reflect.Interface:
		return &schema{}, nil
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 && !reflect.PointerTo(t.Elem()).Implements(typeTextUnm) {
			return &schema{typ: "string", format: "byte"}, nil // encoding/json: base64
		}
		items, err := r.of(t.Elem())
		if err != nil {
			return nil, err
		}
		s := &schema{typ: "array", items: items, fixedLen: -1}
		if t.Kind() == reflect.Array {
			s.fixedLen = t.Len()
		}
		return s, nil
	case reflect.Map:
		switch t.Key().Kind() {
		case reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		default:
			if !reflect.PointerTo(t.Key()).Implements(typeTextUnm) {
				return nil, fmt.Errorf("map key type %s has no JSON form", t.Key())
			}
		}
		extra, err := r.of(t.Elem())
		if err != nil {
			return nil, err
		}
		return &schema{typ: "object", extra: extra}, nil
	case reflect.Struct:
		if r.seen[t] {
			return nil, fmt.Errorf("%s is recursive", t)
		}
		r.seen[t] = true
		defer delete(r.seen, t)
		return r.object(t)
	default:
		return nil, fmt.Errorf("%s has no JSON form", t)
	}
}

// field is a struct field as encoding/json sees it.
type field struct {
	name     string
	depth    int
	tagged   bool
	optional bool
	sf       reflect.StructField
}

func (r *reflector) object(t reflect.Type) (*schema, error) {
	var all []field
	if err := r.fields(t, 0, false, map[reflect.Type]bool{}, &all); err != nil {
		return nil, err
	}
	// encoding/json's dominance: of the fields with one name, the
	// shallowest wins, a tagged one among equals; a tie hides them all.
	byName := map[string][]field{}
	var order []string
	for _, f := range all {
		if _, ok := byName[f.name]; !ok {
			order = append(order, f.name)
		}
		byName[f.name] = append(byName[f.name], f)
	}
	s := &schema{typ: "object"}
	for _, name := range order {
		fs := byName[name]
		sort.SliceStable(fs, func(i, j int) bool {
			if fs[i].depth != fs[j].depth {
				return fs[i].depth < fs[j].depth
			}
			return fs[i].tagged && !fs[j].tagged
		})
		if len(fs) > 1 && fs[0].depth == fs[1].depth && fs[0].tagged == fs[1].tagged {
			continue
		}
		f := fs[0]
		ps, err := r.of(f.sf.Type)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.sf.Name, err)
		}
		if _, opts := parseTag(f.sf.Tag.Get("json")); opts.has("string") {
			// encoding/json quotes these kinds (through one unnamed
			// pointer): the value is JSON inside a string.
			ft := f.sf.Type
			if ft.Name() == "" && ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch ft.Kind() {
			case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
				reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
				reflect.Float32, reflect.Float64, reflect.String:
				ps.asString = true
				ps.typ = "string"
			}
		}
		if d, ok := f.sf.Tag.Lookup("jsonschema"); ok && d != "" {
			if ps.ref {
				d += " (" + refDescription + ")"
			}
			ps.desc = d
		}
		s.props = append(s.props, prop{name, ps})
		if !f.optional && f.sf.Type.Kind() != reflect.Pointer {
			s.required = append(s.required, name)
		}
	}
	return s, nil
}

func (r *reflector) fields(t reflect.Type, depth int, viaPtr bool, visiting map[reflect.Type]bool, out *[]field) error {
	if visiting[t] {
		return nil // encoding/json ignores an embedding cycle
	}
	visiting[t] = true
	defer delete(visiting, t)
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts := parseTag(tag)
		if sf.Anonymous {
			ft := sf.Type
			ptr := false
			if ft.Kind() == reflect.Pointer {
				ft, ptr = ft.Elem(), true
			}
			if !sf.IsExported() && ft.Kind() != reflect.Struct {
				continue
			}
			if name == "" && ft.Kind() == reflect.Struct && !isSpecial(ft) {
				if ptr && !sf.IsExported() {
					continue // encoding/json cannot allocate an unexported embedded pointer
				}
				if err := r.fields(ft, depth+1, viaPtr || ptr, visiting, out); err != nil {
					return err
				}
				continue
			}
		} else if !sf.IsExported() {
			continue
		}
		f := field{name: name, depth: depth, tagged: name != "", sf: sf,
			optional: viaPtr || opts.has("omitempty") || opts.has("omitzero")}
		if f.name == "" {
			f.name = sf.Name
		}
		*out = append(*out, f)
	}
	return nil
}

// isSpecial reports whether an embedded struct type is one json reads
// as a value of its own rather than flattening its fields.
func isSpecial(t reflect.Type) bool {
	return t == typeBlobRef || t == typeReference || t == typeTime ||
		reflect.PointerTo(t).Implements(typeJSONUnm) || reflect.PointerTo(t).Implements(typeTextUnm)
}

type tagOpts string

func parseTag(tag string) (string, tagOpts) {
	name, opts, _ := strings.Cut(tag, ",")
	return name, tagOpts(opts)
}

func (o tagOpts) has(opt string) bool {
	for s := string(o); s != ""; {
		var cur string
		cur, s, _ = strings.Cut(s, ",")
		if cur == opt {
			return true
		}
	}
	return false
}

// marshal writes s as JSON Schema, properties in field order.
func (s *schema) marshal() json.RawMessage {
	var b bytes.Buffer
	s.write(&b)
	return b.Bytes()
}

func (s *schema) write(b *bytes.Buffer) {
	b.WriteByte('{')
	first := true
	key := func(k string) {
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(strconv.Quote(k))
		b.WriteByte(':')
	}
	str := func(v string) {
		e, _ := json.Marshal(v)
		b.Write(e)
	}
	if s.typ != "" {
		key("type")
		if s.nullable {
			b.WriteString(`["` + s.typ + `","null"]`)
		} else {
			str(s.typ)
		}
	}
	if s.desc != "" {
		key("description")
		str(s.desc)
	}
	if s.format != "" {
		key("format")
		str(s.format)
	}
	if s.typ == "integer" && !s.asString {
		if lo, hi, ok := s.intRange(); ok {
			key("minimum")
			b.WriteString(lo)
			if hi != "" {
				key("maximum")
				b.WriteString(hi)
			}
		}
	}
	if s.typ == "object" {
		if s.extra == nil {
			key("properties")
			b.WriteByte('{')
			for i, p := range s.props {
				if i > 0 {
					b.WriteByte(',')
				}
				str(p.name)
				b.WriteByte(':')
				p.s.write(b)
			}
			b.WriteByte('}')
		}
		if len(s.required) > 0 {
			key("required")
			b.WriteByte('[')
			for i, r := range s.required {
				if i > 0 {
					b.WriteByte(',')
				}
				str(r)
			}
			b.WriteByte(']')
		}
		key("additionalProperties")
		if s.extra != nil {
			s.extra.write(b)
		} else {
			b.WriteString("false")
		}
	}
	if s.typ == "array" {
		key("items")
		s.items.write(b)
		if s.fixedLen >= 0 {
			n := strconv.Itoa(s.fixedLen)
			key("minItems")
			b.WriteString(n)
			key("maxItems")
			b.WriteString(n)
		}
	}
	b.WriteByte('}')
}

// intRange is the bound an integer schema states: unsigned integers are at
// least 0; integers narrower than 64 bits state both bounds (wider ones
// would lose precision as JSON numbers in many readers).
func (s *schema) intRange() (lo, hi string, ok bool) {
	switch {
	case s.unsigned && s.intBits < 64:
		return "0", strconv.FormatUint(1<<s.intBits-1, 10), true
	case s.unsigned:
		return "0", "", true
	case s.intBits < 64:
		return strconv.FormatInt(-1<<(s.intBits-1), 10), strconv.FormatInt(1<<(s.intBits-1)-1, 10), true
	}
	return "", "", false
}
