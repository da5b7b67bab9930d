package abi

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestHTTPResponseRoundTrip(t *testing.T) {
	r := HTTPResponse{Status: 200, Header: map[string][]string{"B": {"2", "3"}, "A": {"1"}}, Body: []byte("hello")}
	got, err := DecodeHTTPResponse(EncodeHTTPResponse(r))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("round trip: got %+v want %+v", got, r)
	}
}

func TestDecodeHTTPResponseHostile(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":       nil,
		"bad magic":   []byte("XXXX"),
		"huge status": append([]byte("MHR1"), 0xff, 0xff, 0x03, 0),
		"huge count":  append([]byte("MHR1"), 200, 1, 0xff, 0xff, 0xff, 0xff, 0x0f),
		"long length": append([]byte("MHR1"), 200, 1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f),
		"trailing":    append(EncodeHTTPResponse(HTTPResponse{Status: 200}), 1),
		"bad varint":  append([]byte("MHR1"), 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80),
	} {
		if _, err := DecodeHTTPResponse(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %v, want ErrMalformed", name, err)
		}
	}
}

func TestDecodeHTTPRequest(t *testing.T) {
	for _, tc := range []struct {
		in, err string
	}{
		{`{"method":"GET","url":"/search"}`, ""},
		{`{"method":"GET","url":"/search","body":"aGk=","body_blob":5}`, "both body"},
		{`{"method":"","url":"/"}`, "method"},
		{`{"method":"GET","url":""}`, "url"},
		{`{"method":"GET","url":"/","extra":1}`, "unknown field"},
		{`{"method":"GET","url":"/"} {}`, "trailing"},
		{`[]`, "malformed"},
		{`{"method":"GET","url":"/","header":{"X":["` + strings.Repeat("a", MaxHeaderBytes) + `"]}}`, "too large"},
	} {
		_, err := DecodeHTTPRequest([]byte(tc.in))
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("DecodeHTTPRequest(%.60s) = %v, want error containing %q", tc.in, err, tc.err)
		}
	}
	if _, err := DecodeHTTPRequest(make([]byte, MaxArgLen+1)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized: %v", err)
	}
}

func TestHandle(t *testing.T) {
	h := MakeHandle(5, 7)
	if h.Index() != 5 || h.Gen() != 7 {
		t.Fatalf("MakeHandle(5,7) = %#x: index %d gen %d", uint32(h), h.Index(), h.Gen())
	}
	if MakeHandle(0, 1) == 0 {
		t.Fatal("a valid handle is zero")
	}
	if MakeHandle(0, MaxGen).Gen() != MaxGen {
		t.Fatal("MaxGen does not fit")
	}
}

func FuzzDecodeHTTPResponse(f *testing.F) {
	f.Add(EncodeHTTPResponse(HTTPResponse{Status: 200, Header: map[string][]string{"A": {"b"}}, Body: []byte("x")}))
	f.Add([]byte("MHR1"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeHTTPResponse(b)
		if err != nil {
			return
		}
		// decode, encode, decode is stable
		r2, err := DecodeHTTPResponse(EncodeHTTPResponse(r))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if r.Status != r2.Status || !bytes.Equal(r.Body, r2.Body) || len(r.Header) != len(r2.Header) {
			t.Fatalf("round trip differs: %+v vs %+v", r, r2)
		}
	})
}

func FuzzDecodeHTTPRequest(f *testing.F) {
	f.Add([]byte(`{"method":"GET","url":"/search?q=1","header":{"A":["b"]}}`))
	f.Add([]byte(`{"method":"POST","url":"/x","body_blob":4294967295}`))
	f.Add([]byte(`{"method":"GET","url":"/","body":"!!"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeHTTPRequest(b)
		if err != nil {
			return
		}
		enc, err := EncodeHTTPRequest(r)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		r2, err := DecodeHTTPRequest(enc)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", enc, err)
		}
		if r.Method != r2.Method || r.URL != r2.URL || !bytes.Equal(r.Body, r2.Body) || r.BodyBlob != r2.BodyBlob {
			t.Fatalf("round trip differs: %+v vs %+v", r, r2)
		}
	})
}

func TestSize(t *testing.T) {
	for in, want := range map[string]int64{`1024`: 1024, `"64KiB"`: 64 << 10, `"1 MB"`: 1000000, `"7"`: 7} {
		var s Size
		if err := json.Unmarshal([]byte(in), &s); err != nil || int64(s) != want {
			t.Errorf("Unmarshal(%s) = %d, %v; want %d", in, s, err, want)
		}
	}
	for _, in := range []string{`"64XB"`, `1e30`, `"abc"`, `true`, `"99999999999999999999GiB"`} {
		var s Size
		if err := json.Unmarshal([]byte(in), &s); err == nil {
			t.Errorf("Unmarshal(%s) = %d, want an error", in, s)
		}
	}
}
