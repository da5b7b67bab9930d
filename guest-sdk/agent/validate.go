package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// decodeArgs decodes the arguments a model wrote into a T, trusting
// nothing: at most max bytes, one JSON document that every reader reads
// alike (abi.CheckJSON: no duplicated keys, valid UTF-8), valid against
// the schema the model was shown (types, required properties, no unknown
// properties, null only where a pointer allows it, fixed array lengths,
// integer bounds), every BlobRef naming a reference in refs, and then
// decoded by encoding/json with unknown fields refused. An empty string
// is read as {} (models send it for tools without parameters). The error
// names where the problem is, as a path from $, the arguments' root.
func decodeArgs[T any](raw string, s *schema, refs *refTable, max int) (T, error) {
	var zero T
	if len(raw) > max {
		return zero, fmt.Errorf("the arguments are %d bytes (at most %d)", len(raw), max)
	}
	if strings.TrimSpace(raw) == "" {
		raw = "{}"
	}
	b := []byte(raw)
	if err := abi.CheckJSON(b); err != nil {
		return zero, errors.New(strings.TrimPrefix(err.Error(), abi.ErrMalformed.Error()+": "))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return zero, fmt.Errorf("not JSON: %v", err)
	}
	if err := check(v, s, "$", refs); err != nil {
		return zero, err
	}
	var out T
	err := withCodec(refs, func() error {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		return dec.Decode(&out)
	})
	if err != nil {
		return zero, fmt.Errorf("$: %v", plainJSONError(err))
	}
	return out, nil
}

// plainJSONError drops encoding/json's "json: " prefix.
func plainJSONError(err error) string {
	return strings.TrimPrefix(err.Error(), "json: ")
}

func kindOf(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		if isInteger(string(v)) {
			return "an integer"
		}
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func isInteger(n string) bool { return !strings.ContainsAny(n, ".eE") }

func want(s *schema) string {
	switch s.typ {
	case "object":
		return "an object"
	case "array":
		return "an array"
	case "integer":
		return "an integer"
	}
	return "a " + s.typ
}

// check validates v, decoded with UseNumber, against s at path.
func check(v any, s *schema, path string, refs *refTable) error {
	if v == nil {
		if s.nullable || s.typ == "" {
			return nil
		}
		return fmt.Errorf("%s: want %s, got null", path, want(s))
	}
	if s.ref {
		return checkRef(v, path, refs)
	}
	mismatch := func() error {
		return fmt.Errorf("%s: want %s, got %s", path, want(s), kindOf(v))
	}
	switch s.typ {
	case "":
		return nil // any value: json.RawMessage, interfaces, json.Unmarshalers
	case "boolean":
		if _, ok := v.(bool); !ok {
			return mismatch()
		}
	case "string":
		if _, ok := v.(string); !ok {
			return mismatch()
		}
	case "number":
		if _, ok := v.(json.Number); !ok {
			return mismatch()
		}
	case "integer":
		n, ok := v.(json.Number)
		if !ok || !isInteger(string(n)) {
			return mismatch()
		}
		var err error
		if s.unsigned {
			_, err = strconv.ParseUint(string(n), 10, s.intBits)
		} else {
			_, err = strconv.ParseInt(string(n), 10, s.intBits)
		}
		if err != nil {
			lo, hi, _ := s.intRange()
			if lo == "" {
				lo, hi = strconv.FormatInt(-1<<63, 10), strconv.FormatInt(1<<63-1, 10)
			} else if hi == "" {
				hi = strconv.FormatUint(1<<64-1, 10)
			}
			return fmt.Errorf("%s: %s is out of range [%s, %s]", path, n, lo, hi)
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return mismatch()
		}
		if s.fixedLen >= 0 && len(a) != s.fixedLen {
			return fmt.Errorf("%s: want an array of exactly %d items, got %d", path, s.fixedLen, len(a))
		}
		for i, e := range a {
			if err := check(e, s.items, path+"["+strconv.Itoa(i)+"]", refs); err != nil {
				return err
			}
		}
	case "object":
		o, ok := v.(map[string]any)
		if !ok {
			return mismatch()
		}
		keys := make([]string, 0, len(o))
		for k := range o {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if s.extra != nil {
			for _, k := range keys {
				if err := check(o[k], s.extra, childPath(path, k), refs); err != nil {
					return err
				}
			}
			return nil
		}
		for _, r := range s.required {
			if _, ok := o[r]; !ok {
				return fmt.Errorf("%s: missing required property %q", path, r)
			}
		}
		for _, k := range keys {
			ps := s.prop(k)
			if ps == nil {
				names := make([]string, len(s.props))
				for i, p := range s.props {
					names[i] = p.name
				}
				if len(names) == 0 {
					return fmt.Errorf("%s: unknown property %q (this tool takes no parameters)", path, k)
				}
				return fmt.Errorf("%s: unknown property %q (properties: %s)", path, k, strings.Join(names, ", "))
			}
			if err := check(o[k], ps, childPath(path, k), refs); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkRef accepts "$name" or {"ref":"$name"} naming a reference in refs.
func checkRef(v any, path string, refs *refTable) error {
	name, ok := refName(v)
	if !ok {
		return fmt.Errorf(`%s: want a reference ("$name"), got %s`, path, kindOf(v))
	}
	if _, ok := refs.get(name); !ok {
		return fmt.Errorf("%s: %v", path, refs.unknown(name))
	}
	return nil
}

func refName(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case map[string]any:
		if s, ok := v["ref"].(string); ok && len(v) == 1 {
			return s, true
		}
	}
	return "", false
}

func childPath(path, key string) string {
	if isIdent(key) {
		return path + "." + key
	}
	return path + "[" + strconv.Quote(key) + "]"
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func reflectType[T any]() reflect.Type { return reflect.TypeFor[T]() }
