package kindapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// DecodeJSONValue decodes a JSON document for a constraint activation:
// objects become map[string]any, whole numbers int64 (so `amount <= 50`
// compares integers), other numbers float64. Empty input is an empty
// object.
//
// A constraint must judge the document the server reads, so
// DecodeJSONValue refuses
//
//   - what abi.CheckJSON refuses, through abi.DecodeJSONNumber: a key
//     given twice at any depth (a constraint would judge one value, a
//     server might read the other) and a string that is not valid UTF-8,
//     lone surrogate escapes included (encoding/json would read U+FFFD);
//   - a number the constraint would not see exactly. A whole number
//     within int64 is kept only if a double holds it exactly too, since
//     CEL compares an int with a double as doubles: 9007199254740993 is
//     refused. Any other number becomes the double it parses to and is
//     kept only if its text denotes that double exactly or its shortest
//     decimal form: "0.1", "10.00", "1e20" and 2^64 written out are kept;
//     "50.000000000000001" (seen as 50) and "1e400" are refused;
//   - an object with two keys equal but for case ("amount", "Amount"): a
//     kind decoding the same arguments into a struct with encoding/json,
//     or a server doing so, reads either key as the field, while the
//     constraint would judge only "amount".
//
// Errors name the value's path, as abi.CheckJSON's do. They wrap
// abi.ErrMalformed (or abi.ErrTooLarge).
func DecodeJSONValue(b []byte) (any, error) {
	if len(b) == 0 {
		return map[string]any{}, nil
	}
	var v any
	if err := abi.DecodeJSONNumber(b, &v); err != nil {
		return nil, err
	}
	return normaliseNumbers(v, nil)
}

// normaliseNumbers replaces the json.Numbers in v, at path at from the
// root, by the values a constraint sees, and refuses objects with keys
// equal but for case.
func normaliseNumbers(v any, at []any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		n, err := exactNumber(string(x))
		if err != nil {
			return nil, fmt.Errorf("%w at %s", err, jsonPath(at))
		}
		return n, nil
	case map[string]any:
		keys := slices.Sorted(maps.Keys(x))
		folded := make(map[string]string, len(keys))
		for _, k := range keys {
			f := foldKey(k)
			if other, ok := folded[f]; ok {
				return nil, fmt.Errorf("%w: keys %q and %q in object at %s differ only in case, and encoding/json matches a struct field to either",
					abi.ErrMalformed, other, k, jsonPath(at))
			}
			folded[f] = k
		}
		for _, k := range keys {
			n, err := normaliseNumbers(x[k], append(at, k))
			if err != nil {
				return nil, err
			}
			x[k] = n
		}
	case []any:
		for i, e := range x {
			n, err := normaliseNumbers(e, append(at, i))
			if err != nil {
				return nil, err
			}
			x[i] = n
		}
	}
	return v, nil
}

// foldKey maps every rune of s to the least rune of its simple case
// folding orbit, so foldKey(a) == foldKey(b) exactly when
// strings.EqualFold(a, b): the matching encoding/json uses between object
// keys and struct fields ("amount", "Amount", "AMOUNT"; "key" and
// "\u212aey", with a Kelvin sign).
func foldKey(s string) string {
	var b strings.Builder
	for _, r := range s {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}

// jsonPath writes a path as abi.CheckJSON does: $.offer.items[1]["a b"].
func jsonPath(at []any) string {
	var b strings.Builder
	b.WriteByte('$')
	for _, e := range at {
		switch e := e.(type) {
		case int:
			b.WriteString("[" + strconv.Itoa(e) + "]")
		case string:
			if isIdent(e) {
				b.WriteString("." + e)
			} else {
				b.WriteString("[" + strconv.Quote(e) + "]")
			}
		}
	}
	return b.String()
}

func isIdent(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// ExactDouble reports whether the JSON number s is exactly a float64, the
// one number type a constraint, a protobuf Struct (an in-toto predicate)
// or JavaScript holds, judged as DecodeJSONValue judges numbers: in linear
// time, with no big.Rat.
func ExactDouble(s string) bool {
	_, err := exactNumber(s)
	return err == nil
}

// exactNumber converts the JSON number s to the int64 or float64 a
// constraint sees, or says (wrapping abi.ErrMalformed) why that would not
// be s.
//
// Equality of decimal values is decided on the digits (decimalValue), not
// with math/big: big.Rat.SetString takes seconds on a hostile number of
// a megabyte, this is linear.
func exactNumber(s string) (any, error) {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			if f := float64(i); f < 0x1p63 && int64(f) == i {
				return i, nil
			}
			return nil, fmt.Errorf("%w: number %s cannot be judged exactly (compared with a double it would be seen as %s)",
				abi.ErrMalformed, short(s), strconv.FormatFloat(float64(i), 'f', 0, 64))
		}
		// Beyond int64: judged as the double it becomes.
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) { // not a number; abi.CheckJSON refuses those
		return nil, fmt.Errorf("%w: number %s cannot be read: %v", abi.ErrMalformed, short(s), err)
	}
	if math.IsInf(f, 0) {
		return nil, fmt.Errorf("%w: number %s cannot be judged exactly (it is beyond the range of a double)", abi.ErrMalformed, short(s))
	}
	shortest := strconv.FormatFloat(f, 'g', -1, 64)
	text, ok := decimalValue(s)
	if ok && (text == mustDecimal(shortest) || text == mustDecimal(strconv.FormatFloat(f, 'e', 767, 64))) {
		return f, nil
	}
	return nil, fmt.Errorf("%w: number %s cannot be judged exactly (it would be seen as %s)", abi.ErrMalformed, short(s), shortest)
}

// decimal is the value of a decimal number: -digits×10^exp, with digits
// free of leading and trailing zeros; the zero value is zero.
type decimal struct {
	neg    bool
	digits string
	exp    int64
}

// decimalValue reads a JSON number (or strconv's 'e' and 'g' forms). It
// reports false for an exponent too large to matter: such a number is
// never a finite nonzero double's.
func decimalValue(s string) (decimal, bool) {
	var d decimal
	if strings.HasPrefix(s, "-") {
		d.neg, s = true, s[1:]
	}
	mant, expText := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, expText = s[:i], s[i+1:]
	}
	whole, frac := mant, ""
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		whole, frac = mant[:i], mant[i+1:]
	}
	digits := strings.TrimLeft(whole+frac, "0")
	if digits == "" {
		return decimal{}, true // zero, whatever its sign and exponent
	}
	d.digits = strings.TrimRight(digits, "0")
	d.exp = int64(len(digits)-len(d.digits)) - int64(len(frac))
	if expText != "" {
		e, err := strconv.ParseInt(expText, 10, 64)
		if err != nil || e > 1<<40 || e < -1<<40 {
			return decimal{}, false
		}
		d.exp += e
	}
	return d, true
}

func mustDecimal(s string) decimal {
	d, _ := decimalValue(s)
	return d
}

// short abbreviates a long number for an error message.
func short(s string) string {
	if len(s) <= 40 {
		return s
	}
	return s[:32] + "…(" + strconv.Itoa(len(s)) + " characters)"
}

// CanonicalJSON writes v as encoding/json does, with map keys sorted, but
// HTML characters (<, > and &) kept as they are and no trailing newline:
// one value has one serialisation, whatever a server or a provider wrote
// (an endorsed answer's content, a pinned tool definition's digest).
func CanonicalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
