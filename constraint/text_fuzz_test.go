package constraint

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzText: the text functions never panic, stay within their bounds,
// return each value once, and every value is found again in itself and
// is its own canonical form (what given and seen look up); an IBAN's
// checksum holds.
func FuzzText(f *testing.F) {
	for _, s := range []string{
		"see https://Example.com/a?b=1#c. and www.x.example/(y)",
		"mailto:Bob@Example.com, a.b+c@x.io",
		"DE89 3704 0044 0532 0130 00, gb82west12345698765432",
		"https://BÜCHER.example/ü user@bücher.example",
		"://@@www.www.:/",
		"a@b.c@d.ee https://u@h.example",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for name, find := range map[string]func(string) ([]string, error){"urls": URLs, "emails": Emails, "ibans": IBANs} {
			vals, err := find(s)
			if err != nil {
				continue
			}
			if len(vals) > MaxTextValues {
				t.Fatalf("%s: %d values", name, len(vals))
			}
			seen := map[string]bool{}
			for _, v := range vals {
				if seen[v] {
					t.Fatalf("%s(%q): %q twice", name, s, v)
				}
				seen[v] = true
				if v == "" || len(v) > MaxValueLen {
					t.Fatalf("%s(%q): value %q", name, s, v)
				}
				if name == "ibans" {
					if len(v) < minIBAN || len(v) > maxIBAN || strings.ToUpper(v) != v || !ibanChecksum([]byte(v)) {
						t.Fatalf("ibans(%q): %q", s, v)
					}
				}
				if utf8.ValidString(s) {
					again, err := find(v)
					if err != nil || len(again) == 0 {
						t.Fatalf("%s(%q) found %q, in which it finds %q, %v", name, s, v, again, err)
					}
					// given(v) and seen(v) look v itself up.
					if c := canonical(v); c != v {
						t.Fatalf("%s(%q) found %q, whose canonical form is %q", name, s, v, c)
					}
				}
			}
		}
		vals, _ := FindValues(s, 8)
		if len(vals) > 8 {
			t.Fatalf("FindValues(%q, 8): %d values", s, len(vals))
		}
		_ = canonical(s)
	})
}
