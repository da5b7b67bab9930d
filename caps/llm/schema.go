package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Bounds on a schema an answer is checked against, and on a closed one.
const (
	MaxSchemaBytes   = 64 << 10
	MaxClosedDepth   = 8
	MaxClosedEnum    = 64 // constants in one enum
	MaxClosedConst   = 64 // bytes of one string constant
	MaxClosedItems   = 64 // maxItems of a closed array
	MaxClosedProps   = 64 // properties of a closed object
	closedPathPrefix = "$"
)

// compileSchema reads and resolves a JSON Schema (draft 2020-12 or
// draft-07) for validating answers. External references are refused: a
// schema is checked as it is, never with a document fetched from
// somewhere.
func compileSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("the json_schema has no schema")
	}
	if len(raw) > MaxSchemaBytes {
		return nil, fmt.Errorf("the schema is %d bytes (max %d)", len(raw), MaxSchemaBytes)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("not a JSON Schema: %v", err)
	}
	r, err := s.Resolve(&jsonschema.ResolveOptions{
		Loader: func(uri *url.URL) (*jsonschema.Schema, error) {
			return nil, fmt.Errorf("external reference %s refused", uri)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("not a usable JSON Schema: %v", err)
	}
	return r, nil
}

// validateAnswer checks that content is one JSON value that validates
// against r (or is an object, when r is nil: json_object), and returns
// the value.
//
// Every answer is read as abi.CheckJSON reads a guest's document: a key
// given twice at any depth (after unescaping), a string that is not valid
// UTF-8 (a lone surrogate escape included) or data after the value is
// refused, since encoding/json would have read one of two values, or
// U+FFFD, where another reader reads something else. When exact is set
// (extract, whose value the kernel re-serialises and endorses) the answer
// is decoded with kindapi.DecodeJSONValue: keys equal but for case and
// numbers that would not be read exactly are refused too, whole numbers
// become int64 and others float64.
func validateAnswer(content string, r *jsonschema.Resolved, exact bool) (any, error) {
	var v any
	switch {
	case strings.TrimSpace(content) == "":
		return nil, fmt.Errorf("the answer is not JSON: it is empty")
	case exact:
		var err error
		if v, err = kindapi.DecodeJSONValue([]byte(content)); err != nil {
			return nil, fmt.Errorf("the answer is not JSON every reader reads alike: %v", err)
		}
	default:
		if err := abi.CheckJSON([]byte(content)); err != nil {
			return nil, fmt.Errorf("the answer is not JSON every reader reads alike: %v", err)
		}
		if err := json.Unmarshal([]byte(content), &v); err != nil {
			return nil, fmt.Errorf("the answer is not JSON: %v", err)
		}
	}
	if r == nil {
		if _, ok := v.(map[string]any); !ok {
			return nil, fmt.Errorf("the answer is not a JSON object")
		}
		return v, nil
	}
	if err := r.Validate(v); err != nil {
		return nil, fmt.Errorf("the answer does not match the schema: %v", err)
	}
	return v, nil
}

// canonical is the serialisation of a value validateAnswer decoded
// exactly (nil, bool, int64, float64, string, []any, map[string]any):
// object keys sorted by their bytes, no white space, int64 in decimal,
// float64 as encoding/json writes it (the shortest form that reads back
// to the same double), strings as encoding/json escapes them but for
// HTML (<, > and & are kept as they are). It is what an endorsed answer's
// content is: one value has one serialisation, whatever the provider
// wrote.
func canonical(v any) ([]byte, error) { return kindapi.CanonicalJSON(v) }

// closedKeywords are the keywords a closed schema may use. Anything else
// (pattern, format, $ref, anyOf, if, not, ...) makes it open: the kernel
// would have to reason about it, and it refuses to.
var closedKeywords = map[string]bool{
	"type": true, "enum": true, "const": true, "title": true, "description": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true,
	"properties": true, "required": true, "additionalProperties": true,
	"items": true, "minItems": true, "maxItems": true,
	"$schema": true,
}

// checkClosed reports why a schema is not closed, or nil when it is: every
// value it admits is a boolean, a number between bounds, a constant the
// schema names (enum, const: at most MaxClosedEnum, strings at most
// MaxClosedConst bytes), or an array (at most MaxClosedItems) or object
// (fixed properties, additionalProperties false) of those. No free
// string, no unbounded number or array: what an answer can say is chosen
// among what the schema's author wrote, never phrased by whoever wrote
// the text the model read. The kernel checks this itself; a schema's own
// claims (strict, titles) count for nothing.
func checkClosed(raw json.RawMessage) error {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	return closed(v, closedPathPrefix, 0)
}

func closed(v any, path string, depth int) error {
	if depth > MaxClosedDepth {
		return fmt.Errorf("%s: nested deeper than %d", path, MaxClosedDepth)
	}
	s, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: a schema must be an object (true or false schemas are not closed)", path)
	}
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !closedKeywords[k] {
			return fmt.Errorf("%s: keyword %q is not allowed in a closed schema", path, k)
		}
	}
	if e, ok := s["enum"]; ok {
		list, ok := e.([]any)
		if !ok || len(list) == 0 || len(list) > MaxClosedEnum {
			return fmt.Errorf("%s: enum must list 1..%d constants", path, MaxClosedEnum)
		}
		for _, c := range list {
			if err := constant(c, path+".enum"); err != nil {
				return err
			}
		}
		return nil
	}
	if c, ok := s["const"]; ok {
		return constant(c, path+".const")
	}
	t, ok := s["type"].(string)
	if !ok {
		return fmt.Errorf("%s: needs one type (a string), an enum or a const", path)
	}
	switch t {
	case "boolean", "null":
		return nil
	case "integer", "number":
		_, lo := s["minimum"]
		_, xlo := s["exclusiveMinimum"]
		_, hi := s["maximum"]
		_, xhi := s["exclusiveMaximum"]
		if !(lo || xlo) || !(hi || xhi) {
			return fmt.Errorf("%s: a %s needs a minimum and a maximum", path, t)
		}
		return nil
	case "string":
		return fmt.Errorf("%s: a free string (a closed schema allows strings only as enum or const)", path)
	case "array":
		mi, ok := s["maxItems"].(json.Number)
		n, err := mi.Int64()
		if !ok || err != nil || n < 0 || n > MaxClosedItems {
			return fmt.Errorf("%s: an array needs maxItems of at most %d", path, MaxClosedItems)
		}
		items, ok := s["items"]
		if !ok {
			return fmt.Errorf("%s: an array needs items", path)
		}
		return closed(items, path+".items", depth+1)
	case "object":
		if ap, ok := s["additionalProperties"].(bool); !ok || ap {
			return fmt.Errorf("%s: an object needs additionalProperties: false", path)
		}
		props, _ := s["properties"].(map[string]any)
		if len(props) > MaxClosedProps {
			return fmt.Errorf("%s: %d properties (max %d)", path, len(props), MaxClosedProps)
		}
		names := make([]string, 0, len(props))
		for n := range props {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if err := closed(props[n], path+".properties."+n, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%s: type %q is not closed", path, t)
}

// constant checks one enum or const value: a scalar, a string at most
// MaxClosedConst bytes.
func constant(c any, path string) error {
	switch x := c.(type) {
	case nil, bool, json.Number:
		return nil
	case string:
		if len(x) > MaxClosedConst {
			return fmt.Errorf("%s: a string constant of %d bytes (max %d)", path, len(x), MaxClosedConst)
		}
		return nil
	}
	return fmt.Errorf("%s: constants must be strings, numbers, booleans or null", path)
}
