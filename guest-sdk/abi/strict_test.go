package abi

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

var checkJSONCases = []struct {
	name, in string
	err      string // "" when the document is accepted
}{
	// Accepted.
	{"empty object", `{}`, ""},
	{"empty array", `[]`, ""},
	{"scalars", `[1,-0.5e+10,0,1E3,"s",true,false,null]`, ""},
	{"top-level string", `"s"`, ""},
	{"top-level number", ` 12 `, ""},
	{"white space", " \t\r\n{ \"a\" : [ 1 , 2 ] }\n", ""},
	{"nested", `{"a":{"b":[{"c":1},{"c":2}]},"d":"e"}`, ""},
	{"same key at other levels", `{"a":{"a":{"a":1}}}`, ""},
	{"same key in sibling objects", `[{"a":1},{"a":2}]`, ""},
	{"same value twice", `["a","a"]`, ""},
	{"empty key", `{"":1,"a":2}`, ""},
	{"keys differing by a NUL", `{"a\u0000":1,"a":2}`, ""},
	{"keys differing by case", `{"a":1,"A":2}`, ""},
	{"escapes", `{"q":"\"\\\/\b\f\n\r\t\u00e9\u20AC"}`, ""},
	{"surrogate pair", `{"k":"\ud83d\ude00"}`, ""},
	{"raw UTF-8", `{"é":"😀 €"}`, ""},

	// Duplicated keys.
	{"dup top level", `{"a":1,"a":2}`, `duplicate key "a" in object at $`},
	{"dup nested", `{"offer":{"amount":50,"amount":5000}}`, `duplicate key "amount" in object at $.offer`},
	{"dup after other keys", `{"a":1,"b":{},"a":3}`, `duplicate key "a" in object at $`},
	{"dup in array of objects", `[{"a":1},{"b":1,"b":2}]`, `duplicate key "b" in object at $[1]`},
	{"dup deep path", `{"x":[0,{"k y":{"z":1,"z":1}}]}`, `duplicate key "z" in object at $.x[1]["k y"]`},
	{"dup same value", `{"a":1,"a":1}`, `duplicate key "a" in object at $`},
	{"dup by escape", `{"a":1,"\u0061":2}`, `duplicate key "a" in object at $`},
	{"dup by escaped slash", `{"a/b":1,"a\/b":2}`, `duplicate key "a/b" in object at $`},
	{"dup by surrogate pair", `{"😀":1,"\ud83d\ude00":2}`, `duplicate key "😀" in object at $`},
	{"dup by hex case", `{"\u00e9":1,"\u00E9":2}`, `duplicate key "é" in object at $`},

	// Invalid UTF-8.
	{"bad byte in value", "{\"a\":\"x\xffy\"}", `invalid UTF-8 byte 0xff in string at $.a`},
	{"bad byte in key", "{\"offer\":{\"\xff\":1}}", `invalid UTF-8 byte 0xff in key at $.offer`},
	{"truncated sequence", "[\"\xc3\"]", `invalid UTF-8 byte 0xc3 in string at $[0]`},
	{"overlong encoding", "\"\xc0\xaf\"", `invalid UTF-8 byte 0xc0 in string at $`},
	{"encoded surrogate", "\"\xed\xa0\x80\"", `invalid UTF-8 byte 0xed in string at $`},
	{"beyond U+10FFFF", "\"\xf4\x90\x80\x80\"", `invalid UTF-8 byte 0xf4 in string at $`},

	// Lone surrogate escapes.
	{"lone high", `{"a":"\ud800"}`, `lone surrogate escape \ud800 in string at $.a`},
	{"lone low", `{"a":"\udc00"}`, `lone surrogate escape \udc00 in string at $.a`},
	{"high then letter", `"\ud800x"`, `lone surrogate escape \ud800`},
	{"high then non-surrogate escape", `"\ud800\u0041"`, `lone surrogate escape \ud800`},
	{"high then high", `"\ud800\ud800"`, `lone surrogate escape \ud800`},
	{"low then high", `"\udc00\ud800"`, `lone surrogate escape \udc00`},
	{"high at end", `"\udbff`, `lone surrogate escape \udbff`},
	{"lone in key", `{"\ud800":1}`, `lone surrogate escape \ud800 in key at $`},

	// Grammar.
	{"empty", ``, "unexpected end"},
	{"white space only", "  ", "unexpected end"},
	{"unclosed object", `{"a":1`, "unexpected end"},
	{"unclosed string", `{"a":"x`, "unterminated string"},
	{"unclosed key", `{"a`, "unterminated key"},
	{"trailing value", `{"a":1} {}`, "trailing data"},
	{"trailing bracket", `{"a":1}]`, "trailing data"},
	{"trailing comma", `[1,]`, "where a value should be"},
	{"trailing comma in object", `{"a":1,}`, "key should be a string"},
	{"missing colon", `{"a" 1}`, "expected ':'"},
	{"missing value", `{"a"}`, "expected ':'"},
	{"missing comma", `[1 2]`, "after a value"},
	{"unquoted key", `{a:1}`, "key should be a string"},
	{"leading zero", `01`, "trailing data"},
	{"bare dot", `1.`, "after '.'"},
	{"bare exponent", `1e`, "exponent"},
	{"bare minus", `-`, "needs digits"},
	{"plus sign", `+1`, "where a value should be"},
	{"control character", "\"a\tb\"", "control character 0x09"},
	{"bad escape", `"\q"`, "invalid escape"},
	{"short unicode escape", `"\u12"`, "four hex digits"},
	{"bad literal", `tru`, "invalid literal"},
	{"literal with junk", `[nullx]`, "after a value"},
	{"junk after a document", `nullx`, "trailing data"},
	{"single quotes", `'a'`, "where a value should be"},
	{"byte order mark", "\ufeff{}", "where a value should be"},
}

func TestCheckJSON(t *testing.T) {
	for _, tc := range checkJSONCases {
		err := CheckJSON([]byte(tc.in))
		if tc.err == "" {
			if err != nil {
				t.Errorf("%s: CheckJSON(%q) = %v, want nil", tc.name, tc.in, err)
			}
			if !json.Valid([]byte(tc.in)) {
				t.Errorf("%s: CheckJSON accepts %q, which json.Valid refuses", tc.name, tc.in)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: CheckJSON(%q) = %v, want an error containing %q", tc.name, tc.in, err, tc.err)
			continue
		}
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: CheckJSON(%q) = %v, not ErrMalformed", tc.name, tc.in, err)
		}
	}
}

// TestDecodeJSONStrict: both decoders refuse what CheckJSON refuses.
func TestDecodeJSONStrict(t *testing.T) {
	for _, in := range []string{
		`{"amount":50,"amount":5000}`, `{"a":{"b":1,"\u0062":2}}`, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}", `{"a":1}]`, `{"a":1}}`,
	} {
		var v any
		if err := DecodeJSON([]byte(in), &v); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeJSON(%q) = %v, want ErrMalformed", in, err)
		}
		if v != nil {
			t.Errorf("DecodeJSON(%q) wrote %#v before refusing", in, v)
		}
		if err := DecodeJSONNumber([]byte(in), &v); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeJSONNumber(%q) = %v, want ErrMalformed", in, err)
		}
	}
	var r struct{ Method string }
	if err := DecodeJSON([]byte(`{"method":"GET","method":"POST"}`), &r); err == nil || !strings.Contains(err.Error(), `duplicate key "method" in object at $`) {
		t.Errorf("DecodeJSON into a struct: %v", err)
	}
}

func TestCheckJSONDepth(t *testing.T) {
	nest := func(n int, open, close string) []byte {
		return []byte(strings.Repeat(open, n) + "0" + strings.Repeat(close, n))
	}
	for _, c := range [][2]string{{"[", "]"}, {`{"a":`, "}"}} {
		ok := nest(MaxJSONDepth, c[0], c[1])
		if err := CheckJSON(ok); err != nil {
			t.Errorf("depth %d (%s): %v", MaxJSONDepth, c[0], err)
		}
		var v any
		if err := json.Unmarshal(ok, &v); err != nil {
			t.Errorf("depth %d (%s): encoding/json refuses what CheckJSON accepts: %v", MaxJSONDepth, c[0], err)
		}
		deep := nest(MaxJSONDepth+1, c[0], c[1])
		if err := CheckJSON(deep); err == nil || !strings.Contains(err.Error(), "nesting deeper than") {
			t.Errorf("depth %d (%s): %v, want a nesting error", MaxJSONDepth+1, c[0], err)
		}
		if err := json.Unmarshal(deep, &v); err == nil {
			t.Errorf("depth %d (%s): encoding/json accepts what CheckJSON refuses", MaxJSONDepth+1, c[0])
		}
	}
	// Hostile input the size of an argument document is refused quickly,
	// without recursion.
	start := time.Now()
	for _, b := range [][]byte{
		bytes.Repeat([]byte("["), MaxArgLen),
		bytes.Repeat([]byte(`{"a":`), MaxArgLen/5),
		[]byte("[" + strings.Repeat(`{"k":[1,"\u00e9",{}]},`, MaxArgLen/24) + "0]"),
	} {
		_ = CheckJSON(b)
	}
	// A bound a loaded machine cannot reach (linear is milliseconds) and
	// a quadratic parse or a recursion cannot keep at this size.
	if d := time.Since(start); d > time.Minute {
		t.Errorf("hostile documents took %v", d)
	}
}

// FuzzCheckJSON: CheckJSON never panics and refuses only with ErrMalformed,
// and grammatical JSON only for a duplicated key, invalid UTF-8, a lone
// surrogate or its depth; what it accepts is JSON encoding/json decodes (into any, failing at most
// on a number beyond float64, and with UseNumber always), and re-encoding
// the decoded value gives a document CheckJSON accepts that decodes to the
// same value.
func FuzzCheckJSON(f *testing.F) {
	for _, tc := range checkJSONCases {
		f.Add([]byte(tc.in))
	}
	for _, s := range []string{`{"a":1e400}`, `{"n":12345678901234567890}`, `[[[[]]]]`, `{"a":[{"b":{"c":"\u0000"}}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := CheckJSON(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("CheckJSON(%q) = %v, not ErrMalformed", b, err)
			}
			// Grammatical JSON is refused only for what CheckJSON adds.
			if json.Valid(b) && !strings.Contains(err.Error(), "duplicate key") && !strings.Contains(err.Error(), "invalid UTF-8") &&
				!strings.Contains(err.Error(), "lone surrogate") && !strings.Contains(err.Error(), "nesting deeper") {
				t.Fatalf("CheckJSON refuses %q, which json.Valid accepts: %v", b, err)
			}
			return
		}
		if !json.Valid(b) {
			t.Fatalf("CheckJSON accepts %q, which json.Valid refuses", b)
		}
		useNumber := func(b []byte) (any, error) {
			var v any
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.UseNumber()
			err := dec.Decode(&v)
			return v, err
		}
		plain := func(b []byte) (any, error) {
			var v any
			err := json.Unmarshal(b, &v)
			return v, err
		}
		for _, decode := range []func([]byte) (any, error){useNumber, plain} {
			v, err := decode(b)
			if err != nil {
				var te *json.UnmarshalTypeError
				if !errors.As(err, &te) || !strings.HasPrefix(te.Value, "number") {
					t.Fatalf("CheckJSON accepts %q, which encoding/json refuses: %v", b, err)
				}
				// Only a number beyond float64, and only without UseNumber.
				continue
			}
			enc, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("encode %#v: %v", v, err)
			}
			if err := CheckJSON(enc); err != nil {
				t.Fatalf("CheckJSON refuses the re-encoding %q of %q: %v", enc, b, err)
			}
			again, err := decode(enc)
			if err != nil {
				t.Fatalf("re-decode of %q: %v", enc, err)
			}
			if !reflect.DeepEqual(again, v) {
				t.Fatalf("round trip of %q differs: %#v vs %#v", b, v, again)
			}
		}
	})
}
