package net

import (
	"errors"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/kernel/kindapi"
)

func TestSubstitute(t *testing.T) {
	vals := [][]byte{[]byte("a b&c"), []byte("{{mandate:splice:0}}")}
	q := func(v []byte) string { return "<" + string(v) + ">" }
	for _, tc := range []struct {
		in, want string
		err      error
	}{
		{"no placeholders", "no placeholders", nil},
		{"/s?q={{mandate:splice:0}}&r={{mandate:splice:1}}", "/s?q=<a b&c>&r=<{{mandate:splice:0}}>", nil}, // never rescanned
		{"{{mandate:splice:2}}", "", kindapi.ErrInvalid},
		{"{{mandate:splice:01}}", "", kindapi.ErrInvalid},
		{"{{mandate:splice:-1}}", "", kindapi.ErrInvalid},
		{"{{mandate:splice:0", "", kindapi.ErrInvalid},
		{"{{mandate:splice:99999}}", "", kindapi.ErrInvalid},
	} {
		got, err := substitute(tc.in, vals, q)
		if (tc.err == nil) != (err == nil) || (tc.err != nil && !errors.Is(err, tc.err)) || got != tc.want {
			t.Errorf("substitute(%q) = %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// FuzzSubstitute: any template and any blobs give a result or EINVAL,
// never a panic, and a successful result's length is the template's minus
// its placeholders plus the substituted values.
func FuzzSubstitute(f *testing.F) {
	f.Add("/search?q={{mandate:splice:0}}", []byte("x"), []byte("{{mandate:splice:1}}"))
	f.Add("{{mandate:splice:", []byte(""), []byte(""))
	f.Add("a{{mandate:splice:1}}b{{mandate:splice:0}}", []byte("\x00\r\n"), []byte("}}"))
	f.Fuzz(func(t *testing.T, tmpl string, a, b []byte) {
		vals := [][]byte{a, b}
		got, err := substitute(tmpl, vals, func(v []byte) string { return string(v) })
		if err != nil {
			if !errors.Is(err, kindapi.ErrInvalid) {
				t.Fatalf("error %v is not EINVAL", err)
			}
			return
		}
		if !strings.Contains(tmpl, splicePrefix) && got != tmpl {
			t.Fatalf("a template without placeholders changed: %q -> %q", tmpl, got)
		}
		if len(got) > len(tmpl)+strings.Count(tmpl, splicePrefix)*(len(a)+len(b)) {
			t.Fatalf("result longer than possible: %d", len(got))
		}
	})
}
