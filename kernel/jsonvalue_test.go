package kernel_test

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

func TestDecodeJSONValueNumbers(t *testing.T) {
	for _, tc := range []struct {
		num  string
		want any    // the value a constraint sees, when accepted
		err  string // else part of the error
	}{
		// Whole numbers within int64 that a double also holds: int64.
		{"0", int64(0), ""},
		{"-0", int64(0), ""},
		{"50", int64(50), ""},
		{"-7", int64(-7), ""},
		{"9007199254740992", int64(1 << 53), ""},
		{"-9007199254740992", int64(-1 << 53), ""},
		{"1152921504606846976", int64(1 << 60), ""},
		{"-9223372036854775808", int64(math.MinInt64), ""},
		// ... that a double does not: CEL compares them with doubles as
		// doubles.
		{"9007199254740993", nil, "number 9007199254740993 cannot be judged exactly (compared with a double it would be seen as 9007199254740992)"},
		{"-9007199254740993", nil, "seen as -9007199254740992"},
		{"9223372036854775807", nil, "seen as 9223372036854775808"},

		// Other numbers: float64, if the text is the double's shortest
		// form or its exact value.
		{"0.1", 0.1, ""},
		{"10.00", 10.0, ""},
		{"1e20", 1e20, ""},
		{"1E+20", 1e20, ""},
		{"100e-2", 1.0, ""},
		{"2.5e-3", 0.0025, ""},
		{"-1.5", -1.5, ""},
		{"0.0", 0.0, ""},
		{"5e-324", 5e-324, ""},
		{"1.7976931348623157e308", math.MaxFloat64, ""},
		{"0.1000000000000000055511151231257827021181583404541015625", 0.1, ""}, // 0.1's exact value
		{"18446744073709551616", 0x1p64, ""},                                   // 2^64 exactly, beyond int64
		{"9007199254740992.0", 0x1p53, ""},

		{"50.000000000000001", nil, "number 50.000000000000001 cannot be judged exactly (it would be seen as 50)"},
		{"0.10000000000000001", nil, "(it would be seen as 0.1)"},
		{"9007199254740993.0", nil, "(it would be seen as 9.007199254740992e+15)"},
		{"9.007199254740993e15", nil, "(it would be seen as 9.007199254740992e+15)"},
		{"18446744073709551617", nil, "number 18446744073709551617 cannot be judged exactly (it would be seen as 1.8446744073709552e+19)"},
		{"1e400", nil, "number 1e400 cannot be judged exactly (it is beyond the range of a double)"},
		{"-1e400", nil, "beyond the range of a double"},
		{"1e-400", nil, "(it would be seen as 0)"},
		{"1e99999999999999999999", nil, "beyond the range of a double"},
		{"1e-99999999999999999999", nil, "(it would be seen as 0)"},
		{"0." + strings.Repeat("3", 1000), nil, "characters) cannot be judged exactly (it would be seen as 0.3333333333333333)"},
	} {
		for _, doc := range []string{tc.num, `{"offer":{"amount":` + tc.num + `}}`, `[1,[` + tc.num + `]]`} {
			v, err := kindapi.DecodeJSONValue([]byte(doc))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, abi.ErrMalformed) {
					t.Errorf("DecodeJSONValue(%.60s) = %#v, %v; want ErrMalformed containing %q", doc, v, err, tc.err)
				}
				continue
			}
			if err != nil {
				t.Errorf("DecodeJSONValue(%.60s): %v", doc, err)
				continue
			}
			got := v
			switch x := v.(type) {
			case map[string]any:
				got = x["offer"].(map[string]any)["amount"]
			case []any:
				got = x[1].([]any)[0]
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("DecodeJSONValue(%.60s): the number is %#v, want %#v", doc, got, tc.want)
			}
		}
	}
	// -0.0 stays a negative zero double.
	if v, err := kindapi.DecodeJSONValue([]byte(`-0.0`)); err != nil || !math.Signbit(v.(float64)) {
		t.Errorf("-0.0: %#v, %v", v, err)
	}
}

func TestDecodeJSONValueStrict(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{`{"amount":50,"amount":5000}`, `duplicate key "amount" in object at $`},
		{`{"offer":{"amount":50,"amount":5000}}`, `duplicate key "amount" in object at $.offer`},
		{`{"items":[{"sku":"a"},{"sku":"b","sku":"c"}]}`, `duplicate key "sku" in object at $.items[1]`},
		{`{"payee":"alice","p\u0061yee":"mallory"}`, `duplicate key "payee" in object at $`},
		{`{"note":"\ud800"}`, `lone surrogate escape \ud800 in string at $.note`},
		{"{\"note\":\"\xff\"}", `invalid UTF-8 byte 0xff in string at $.note`},
		{`{"a":1}]`, `trailing data`},
		// Keys a struct decoder takes for one another.
		{`{"amount":"1.00","Amount":"5000.00"}`, `keys "Amount" and "amount" in object at $ differ only in case`},
		{`{"offer":{"stops":0,"STOPS":3}}`, `keys "STOPS" and "stops" in object at $.offer differ only in case`},
		{`{"idempotency_key":"a","idempotency_\u212aey":"b"}`, `keys "idempotency_key" and "idempotency_Key" in object at $`}, // Kelvin sign
		{`{"s":1,"\u017f":2}`, `keys "s" and "ſ" in object at $`},                                                             // long s
		// Numbers are named by their path.
		{`{"offer":{"amount":50.000000000000001}}`, `(it would be seen as 50) at $.offer.amount`},
		{`{"a b":[0,9007199254740993]}`, `9007199254740992) at $["a b"][1]`},
	} {
		v, err := kindapi.DecodeJSONValue([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, abi.ErrMalformed) {
			t.Errorf("DecodeJSONValue(%s) = %#v, %v; want ErrMalformed containing %q", tc.in, v, err, tc.err)
		}
	}

	for _, ok := range []string{`{"a":1,"b":2}`, `{"e":1,"\u00e9":2}`, `{"ss":1,"\u00df":2}`, `{"i":1,"\u0131":2}`} {
		if _, err := kindapi.DecodeJSONValue([]byte(ok)); err != nil {
			t.Errorf("DecodeJSONValue(%s): %v", ok, err)
		}
	}

	v, err := kindapi.DecodeJSONValue(nil)
	if err != nil || !reflect.DeepEqual(v, map[string]any{}) {
		t.Errorf("empty input: %#v, %v; want an empty object", v, err)
	}
	v, err = kindapi.DecodeJSONValue([]byte(`{"a":[1,{"b":2.5,"c":"x"}],"d":null,"e":true}`))
	want := map[string]any{"a": []any{int64(1), map[string]any{"b": 2.5, "c": "x"}}, "d": nil, "e": true}
	if err != nil || !reflect.DeepEqual(v, want) {
		t.Errorf("nested document: %#v, %v; want %#v", v, err, want)
	}
}

// A hostile number as large as an argument document may be is judged in
// linear time.
func TestDecodeJSONValueHostileNumber(t *testing.T) {
	n := abi.MaxArgLen/2 - 16
	start := time.Now()
	for _, s := range []string{
		"0." + strings.Repeat("0", n) + "1e" + strings.Repeat("9", 6),
		"1" + strings.Repeat("0", n) + "e-" + strings.Repeat("9", 6),
		"0." + strings.Repeat("0", n/2) + "1" + strings.Repeat("7", n/2) + "e500000",
	} {
		if _, err := kindapi.DecodeJSONValue([]byte(s)); err == nil {
			t.Errorf("a %d-character number is accepted", len(s))
		}
	}
	// A bound a loaded machine cannot reach (linear is milliseconds) and
	// a quadratic judgement cannot keep (hours at this size).
	if d := time.Since(start); d > time.Minute {
		t.Errorf("hostile numbers took %v", d)
	}
}
