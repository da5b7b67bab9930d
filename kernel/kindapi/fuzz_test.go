package kindapi

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// FuzzDecodeSpec: a grant spec decodes strictly or fails with an error;
// an error about one field names it.
func FuzzDecodeSpec(f *testing.F) {
	for _, s := range []string{
		`{"origin":"https://a.example","methods":["GET"],"max":5,"nested":{"x":true}}`,
		`{"origin":1}`, `{"max":"5"}`, `{"unknown":1}`, `{"nested":{"y":1}}`, `{"origin":"a"} {}`, `[`, ``, `null`,
		`{"methods":[1]}`, `{"max":1e99}`,
	} {
		f.Add([]byte(s))
	}
	type nested struct {
		X bool `json:"x"`
	}
	type spec struct {
		Origin  string   `json:"origin"`
		Methods []string `json:"methods"`
		Max     *int     `json:"max"`
		Nested  *nested  `json:"nested"`
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var s spec
		err := DecodeSpec("test", b, &s)
		if err == nil {
			return
		}
		var fe *FieldError
		if errors.As(err, &fe) {
			// An unknown field "" once gave a FieldError with no field
			// ({"":1}; crasher kept in testdata/fuzz/FuzzDecodeSpec/).
			if fe.Field == "" || fe.Msg == "" {
				t.Fatalf("DecodeSpec(%q): FieldError %+v without a field or message", b, fe)
			}
			return
		}
		if !strings.HasPrefix(err.Error(), "test: grant spec: ") {
			t.Fatalf("DecodeSpec(%q) = %v: not prefixed with the kind", b, err)
		}
	})
}

// FuzzDecodeJSONValue: a constraint activation decodes to JSON-like values
// with numbers as int64 (whole) or float64, never json.Number, and
// decoding is deterministic.
func FuzzDecodeJSONValue(f *testing.F) {
	for _, s := range []string{
		`{"amount":50,"payee":"a"}`, `{"a":1.5,"b":[1,2.0,-3,1e2]}`, `{"n":9223372036854775808}`, `{"n":1e400}`,
		`[]`, `"x"`, `null`, ``, `{"a":{"b":{"c":[{"d":0}]}}}`, `{"a":1} 1`, `-0`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := DecodeJSONValue(b)
		if err != nil {
			if !errors.Is(err, abi.ErrMalformed) && !errors.Is(err, abi.ErrTooLarge) {
				t.Fatalf("DecodeJSONValue(%q): error %v", b, err)
			}
			return
		}
		var walk func(any)
		walk = func(v any) {
			switch x := v.(type) {
			case nil, bool, string, int64:
			case float64:
				if math.IsNaN(x) {
					t.Fatalf("DecodeJSONValue(%q): NaN", b)
				}
			case map[string]any:
				for _, e := range x {
					walk(e)
				}
			case []any:
				for _, e := range x {
					walk(e)
				}
			default:
				t.Fatalf("DecodeJSONValue(%q): a %T in the result", b, v)
			}
		}
		walk(v)
		v2, err := DecodeJSONValue(b)
		if err != nil || !reflect.DeepEqual(v, v2) {
			t.Fatalf("DecodeJSONValue(%q) is not deterministic: %#v, then %#v, %v", b, v, v2, err)
		}
	})
}

// FuzzLabelJSON: a label decodes from any JSON without panicking, and a
// decoded label is canonical: it encodes and decodes back to itself, and
// its tags are sorted, distinct, non-empty and trimmed.
func FuzzLabelJSON(f *testing.F) {
	for _, s := range []string{
		`{"conf":["pii:alice","financial:alice"],"integ":["web:https://a.example"]}`, `{"conf":[],"integ":[]}`, `{}`,
		`{"conf":[" a ","a",""]}`, `{"conf":["a\u0000b"]}`, `{"conf":null}`, `{"conf":"a"}`, `[]`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var l Label
		if err := json.Unmarshal(b, &l); err != nil {
			return
		}
		for _, tags := range [][]string{l.Conf(), l.Integ()} {
			if !slices.IsSorted(tags) || len(slices.Compact(slices.Clone(tags))) != len(tags) {
				t.Fatalf("label %q: tags %q not sorted and distinct", b, tags)
			}
			for _, tag := range tags {
				if tag == "" || strings.TrimSpace(tag) != tag || strings.Contains(tag, tagSep) {
					t.Fatalf("label %q: tag %q", b, tag)
				}
			}
		}
		enc, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		var l2 Label
		if err := json.Unmarshal(enc, &l2); err != nil || l2 != l {
			t.Fatalf("label %q encodes as %s, which decodes as %v, %v", b, enc, l2, err)
		}
		if !l.CanFlowTo(l) || !l.CanFlowTo(l.Join(NewLabel([]string{"x"}, nil))) {
			t.Fatalf("label %v does not flow to itself or above", l)
		}
	})
}
