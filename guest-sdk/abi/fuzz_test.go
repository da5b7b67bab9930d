package abi

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// FuzzDecodeSpawnRequest: a task_spawn argument decodes to an error or to a
// request within the bounds, which encodes and decodes back to itself.
func FuzzDecodeSpawnRequest(f *testing.F) {
	d := "sha256:" + strings.Repeat("a", 64)
	for _, s := range []string{
		`{"module":"` + d + `"}`,
		`{"module":"` + d + `","input":5,"caps":[{"handle":4097,"name":"web","narrow":{"methods":["GET"]}}],"memory":"16MiB","timeout":"5s","clearance":["pii:alice"]}`,
		`{"module":"` + d + `","caps":[{"handle":1,"name":"a"},{"handle":2,"name":"a"}]}`,
		`{"module":"` + d + `","memory":-1}`, `{"module":"` + d + `","clearance":[]}`, `{"module":""}`, `{"module":"x","memory":1e3}`,
		`{"module":"x","caps":[{"handle":1,"name":"n","narrow":null}]}`, `[`, `{"module":"x"} x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeSpawnRequest(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("DecodeSpawnRequest(%q): error %v is neither ErrMalformed nor ErrTooLarge", b, err)
			}
			return
		}
		if r.Module == "" || len(r.Caps) > MaxSpawnCaps || r.Memory < 0 {
			t.Fatalf("DecodeSpawnRequest(%q) = %+v: out of bounds", b, r)
		}
		enc, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("encode %+v: %v", r, err)
		}
		r2, err := DecodeSpawnRequest(enc)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", enc, err)
		}
		// json.RawMessage keeps the bytes as sent; compare them compacted.
		// An empty caps list is left out when encoding.
		norm := func(r SpawnRequest) SpawnRequest {
			if len(r.Caps) == 0 {
				r.Caps = nil
			}
			for i := range r.Caps {
				r.Caps[i].Narrow = compact(r.Caps[i].Narrow)
			}
			return r
		}
		if r, r2 = norm(r), norm(r2); !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip differs:\n%+v\n%+v", r, r2)
		}
	})
}

func compact(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	v, _ := json.Marshal(b) // json.Marshal compacts a RawMessage
	if string(v) == "null" {
		return nil
	}
	return v
}

// FuzzDecodeJSON: the strict decoder returns an error (ErrMalformed or
// ErrTooLarge) or a value whose encoding decodes to the same value, with
// both DecodeJSON and DecodeJSONNumber; DecodeJSONNumber accepts whatever
// DecodeJSON accepts (and numbers beyond float64).
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1}`, `[1,2,"x",null,true]`, `"s"`, `1.5e3`, `{"a":{"b":[{}]}}`, `{"a":1} {}`, `{"a":1}   `,
		`{"n":12345678901234567890}`, `{"a":"\ud800"}`, `{"a":1,"a":2}`, ``, `nul`, `{"a":1e400}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v any
		err := DecodeJSON(b, &v)
		var n any
		errN := DecodeJSONNumber(b, &n)
		if err == nil && errN != nil {
			t.Fatalf("DecodeJSON(%q) accepts what DecodeJSONNumber refuses: %v", b, errN)
		}
		for _, x := range []struct {
			v      any
			err    error
			decode func([]byte, any) error
		}{{v, err, DecodeJSON}, {n, errN, DecodeJSONNumber}} {
			if x.err != nil {
				if !errors.Is(x.err, ErrMalformed) && !errors.Is(x.err, ErrTooLarge) {
					t.Fatalf("decoding %q: error %v is neither ErrMalformed nor ErrTooLarge", b, x.err)
				}
				continue
			}
			enc, err := json.Marshal(x.v)
			if err != nil {
				t.Fatalf("encode %#v: %v", x.v, err)
			}
			var again any
			if err := x.decode(enc, &again); err != nil {
				t.Fatalf("re-decode of %s: %v", enc, err)
			}
			if !reflect.DeepEqual(again, x.v) {
				t.Fatalf("round trip of %q differs: %#v vs %#v", b, x.v, again)
			}
		}
	})
}

// FuzzParseSize: ParseSize never panics; a size it accepts is, written as
// plain bytes, read back as itself, and as a JSON Size (when it fits an
// int64) too.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{
		"64MiB", "512KB", "1048576", "1 MB", " 7 b ", "0", "18446744073709551615", "18446744073709551616",
		"17179869184GiB", "99999999999999999999GiB", "1.5MB", "-1", "MiB", "1\tkib", "1 GB ",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			return
		}
		plain := strconv.FormatUint(n, 10)
		if m, err := ParseSize(plain); err != nil || m != n {
			t.Fatalf("ParseSize(%q) = %d, but ParseSize(%q) = %d, %v", s, n, plain, m, err)
		}
		q, _ := json.Marshal(s)
		var sz Size
		err = json.Unmarshal(q, &sz)
		if n > 1<<63-1 {
			if err == nil {
				t.Fatalf("Size %s = %d, want an error for %d", q, sz, n)
			}
			return
		}
		if err != nil || uint64(sz) != n {
			t.Fatalf("Size %s = %d, %v; want %d", q, sz, err, n)
		}
	})
}

// FuzzSizeJSON: a Size decodes from any JSON without panicking, never
// negative from a string, and re-encodes as a number that decodes to itself.
func FuzzSizeJSON(f *testing.F) {
	for _, s := range []string{`1024`, `"64KiB"`, `"1 MB"`, `-5`, `1e3`, `"x"`, `true`, `null`, `"9223372036854775808"`, `9223372036854775808`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Size
		if err := s.UnmarshalJSON(b); err != nil {
			return
		}
		if len(b) > 0 && b[0] == '"' && s < 0 {
			t.Fatalf("Size %s = %d: negative from a string", b, s)
		}
		enc, _ := json.Marshal(int64(s))
		var s2 Size
		if err := s2.UnmarshalJSON(enc); err != nil || s2 != s {
			t.Fatalf("Size %s = %d re-decodes from %s as %d, %v", b, s, enc, s2, err)
		}
	})
}
