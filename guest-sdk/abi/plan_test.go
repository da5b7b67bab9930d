package abi

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzDecodePlan: a plan_submit request decodes to an error (ErrMalformed
// or ErrTooLarge) or to a plan that encodes and decodes back to itself.
// The kernel bounds the items and reads each item's arguments.
func FuzzDecodePlan(f *testing.F) {
	for _, s := range []string{
		`{"items":[{"cap":4097,"op":"charge","args":{"payee":"power.example","amount":"84.20","currency":"USD","idempotency_key":"k1"}}]}`,
		`{"items":[{"cap":1,"op":"fetch","args":{"method":"POST","url":"/payments","body":"e30="}},{"cap":1,"op":"fetch","args":{}}]}`,
		`{"items":[]}`, `{"items":null}`, `{"items":[{"cap":1,"op":"x","args":{"a":1,"a":2}}]}`, `{"items":[],"why":"x"}`,
		`{"items":[{"cap":-1}]}`, `[`, `{"items":[]} x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodePlan(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("DecodePlan(%q): error %v is neither ErrMalformed nor ErrTooLarge", b, err)
			}
			return
		}
		enc, err := EncodePlan(p)
		if err != nil {
			t.Fatalf("encode %+v: %v", p, err)
		}
		p2, err := DecodePlan(enc)
		if err != nil {
			t.Fatalf("DecodePlan(EncodePlan(%q)) = %v", b, err)
		}
		// Args are compared as the JSON values they hold.
		if len(p.Items) != len(p2.Items) {
			t.Fatalf("round trip: %d items, then %d", len(p.Items), len(p2.Items))
		}
		for i := range p.Items {
			a, b := p.Items[i], p2.Items[i]
			var av, bv any
			_ = json.Unmarshal(a.Args, &av)
			_ = json.Unmarshal(b.Args, &bv)
			if a.Cap != b.Cap || a.Op != b.Op || !reflect.DeepEqual(av, bv) {
				t.Fatalf("round trip: item %d %+v, then %+v", i, a, b)
			}
		}
	})
}

// TestDecodePlan: a plan keeps each item's arguments as given; unknown
// fields, duplicate keys and trailing data are refused.
func TestDecodePlan(t *testing.T) {
	p, err := DecodePlan([]byte(`{"items":[{"cap":7,"op":"charge","args": {"amount": "84.20"} }]}`))
	if err != nil || len(p.Items) != 1 || p.Items[0].Cap != 7 || p.Items[0].Op != "charge" || string(p.Items[0].Args) != `{"amount": "84.20"}` {
		t.Fatalf("DecodePlan = %+v, %v", p, err)
	}
	for _, bad := range []string{`{"items":[],"why":"x"}`, `{"items":[{"cap":1,"op":"x","args":{"a":1,"a":2}}]}`, `{"items":[]} x`, `not json`} {
		if _, err := DecodePlan([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodePlan(%s) = %v, want ErrMalformed", bad, err)
		}
	}
}
