package constraint

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestURLs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", []string{}},
		{"no links here: example.com, a://, ://x", []string{}},
		{"see https://example.com/a?b=1#c.", []string{"https://example.com/a?b=1#c"}},
		{"HTTPS://Example.COM/Path/X", []string{"https://example.com/Path/X"}},
		{"(https://x.example/a) and [http://y.example/b]", []string{"https://x.example/a", "http://y.example/b"}},
		{"[read](https://x.example/wiki/Go_(language))", []string{"https://x.example/wiki/Go_(language)"}},
		{"<https://x.example/>, \"https://y.example/\"", []string{"https://x.example/", "https://y.example/"}},
		{"www.Example.com/a and www.example.com/a", []string{"www.example.com/a"}},
		{"wwwx.example.com www. 0 www.x", []string{}},
		{"ftp://files.example/x ssh+git://h.example/r", []string{"ftp://files.example/x", "ssh+git://h.example/r"}},
		{"https://User:Pw@Host.Example:8443/P", []string{"https://User:Pw@host.example:8443/P"}},
		{"1https://x.example", []string{"https://x.example"}},
		// IDN: lowercased, not converted to punycode.
		{"https://BÜCHER.example/ü", []string{"https://bücher.example/ü"}},
		{"https://xn--bcher-kva.example", []string{"https://xn--bcher-kva.example"}},
		// A Unicode space ends a URL; so does a control character.
		{"https://a.example/x\u00a0y https://b.example/\x01z", []string{"https://a.example/x", "https://b.example/"}},
		// mailto is an address, not a URL.
		{"mailto:bob@example.com", []string{}},
		{"https://x.example https://x.example https://X.example", []string{"https://x.example"}},
	} {
		got, err := URLs(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("URLs(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestEmails(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", []string{}},
		{"write to Alice@Example.COM.", []string{"alice@example.com"}},
		{"mailto:bob@example.com?subject=x", []string{"bob@example.com"}},
		{"a.b+tag@sub.example.org, c_d@x.io", []string{"a.b+tag@sub.example.org", "c_d@x.io"}},
		{"@home, me@localhost, x@y.z, a@-b.example, .@a.example", []string{}},
		{"user@bücher.example", []string{"user@bücher.example"}},
		{"write to Ü@evil.example or 用户@例子.广告", []string{"ü@evil.example", "用户@例子.广告"}},
		{"a@b.example@c.example", []string{"a@b.example"}},
		{"..a@b.example", []string{"a@b.example"}},
		{"https://u@evil.example/x", []string{"u@evil.example"}},
	} {
		got, err := Emails(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Emails(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestIBANs(t *testing.T) {
	const de = "DE89370400440532013000"
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"", []string{}},
		{"pay DE89 3704 0044 0532 0130 00 now", []string{de}},
		{"pay " + de + ".", []string{de}},
		{"pay de89370400440532013000", []string{de}},
		{"GB82 WEST 1234 5698 7654 32 and FR14 2004 1010 0505 0001 3M02 606", []string{"GB82WEST12345698765432", "FR1420041010050500013M02606"}},
		// A wrong checksum (one digit changed) is not an IBAN.
		{"DE89370400440532013001", []string{}},
		// Part of a longer word is not one.
		{"XDE89370400440532013000", []string{}},
		// The trailing words are not part of it, the checksum says so.
		{"IBAN DE89 3704 0044 0532 0130 00 AB CD", []string{de}},
		{"DE89 3704 0044 0532 0130 00\nDE89 3704", []string{de}},
		{"random AB12 CDEF GHIJ KLMN OPQR", []string{}},
	} {
		got, err := IBANs(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("IBANs(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// TestTextBounds: past a bound a function fails (the call is refused),
// it never answers from part of its input.
func TestTextBounds(t *testing.T) {
	var b strings.Builder
	for i := range MaxTextValues + 1 {
		fmt.Fprintf(&b, "https://h%d.example/ u%d@x.example ", i, i)
	}
	many := b.String()
	for name, f := range map[string]func(string) ([]string, error){"urls": URLs, "emails": Emails} {
		if _, err := f(many); err == nil {
			t.Errorf("%s of %d values: no error", name, MaxTextValues+1)
		}
		// The same value many times is one value.
		if got, err := f(strings.Repeat("https://x.example/ a@x.example ", 10000)); err != nil || len(got) != 1 {
			t.Errorf("%s of one value repeated = %d values, %v; want 1", name, len(got), err)
		}
	}
	if _, err := URLs(strings.Repeat("x", MaxTextLen+1)); err == nil {
		t.Errorf("URLs of %d bytes: no error", MaxTextLen+1)
	}
	if _, err := URLs("https://x.example/" + strings.Repeat("a", MaxValueLen)); err == nil {
		t.Errorf("a URL longer than MaxValueLen: no error")
	}
	if _, err := Emails(strings.Repeat("a", 65) + "@x.example"); err == nil {
		t.Errorf("a local part of 65 bytes: no error")
	}
	if _, err := Emails("a@" + strings.Repeat("b", 260) + ".example"); err == nil {
		t.Errorf("a domain of 268 bytes: no error")
	}
	// Hostile inputs of the largest size: scanned to the end (an error
	// only for a value too long or too many values).
	for _, s := range []string{
		strings.Repeat("://", MaxTextLen/3),
		strings.Repeat("@", MaxTextLen),
		strings.Repeat("a@", MaxTextLen/2),
		strings.Repeat("DE89 ", MaxTextLen/5),
		strings.Repeat("www.", MaxTextLen/4),
		strings.Repeat("é", MaxTextLen/2),
		"https://x.example/" + strings.Repeat(")", MaxTextLen-32),
		"https://x.example/" + strings.Repeat("a)", MaxTextLen/2-32),
		strings.Repeat("www.x,", MaxTextLen/6),
		strings.Repeat("www.x ", MaxTextLen/6-10) + "a://b.example",
		strings.Repeat(". ", MaxTextLen/2-10) + "a://b.example",
		strings.Repeat("a@b.cc.", MaxTextLen/7),
	} {
		for name, f := range map[string]func(string) ([]string, error){"urls": URLs, "emails": Emails, "ibans": IBANs} {
			if _, err := f(s); err != nil && !errors.As(err, new(errTooMany)) && !strings.Contains(err.Error(), "at most") {
				t.Errorf("%s(%.12q...): %v", name, s, err)
			}
		}
	}
}

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"HTTPS://X.example/A":          "https://x.example/A",
		"Alice@Example.com":            "alice@example.com",
		"mailto:Alice@Example.com":     "alice@example.com",
		"de89 3704 0044 0532 0130 00":  "DE89370400440532013000",
		"  https://x.example/  ":       "https://x.example/",
		"https://x.example/ and more":  "https://x.example/ and more",
		"just words":                   "just words",
		"https://x.example/.":          "https://x.example/.",
		"a@x.example, b@x.example":     "a@x.example, b@x.example",
		"DE89 3704 0044 0532 0130 001": "DE89 3704 0044 0532 0130 001",
	} {
		if got := canonical(in); got != want {
			t.Errorf("canonical(%q) = %q; want %q", in, got, want)
		}
	}
}

// TestTextInCEL: the functions in expressions, their errors denying.
func TestTextInCEL(t *testing.T) {
	c := New()
	for _, x := range []struct {
		src  string
		body string
		want bool
		err  bool
	}{
		{`urls(args.text) == ["https://x.example/a"]`, "see HTTPS://X.example/a.", true, false},
		{`size(emails(args.text)) == 0`, "nothing", true, false},
		{`ibans(args.text).all(i, i == "DE89370400440532013000")`, "DE89 3704 0044 0532 0130 00", true, false},
		{`urls(args.text).exists(u, u.startsWith("http://"))`, "https://a.example http://b.example", true, false},
		{`size(urls(args.text)) == 0`, strings.Repeat("x", MaxTextLen+1), false, true},
	} {
		e, err := c.Compile(x.src, []string{"args"})
		if err != nil {
			t.Fatalf("Compile(%q): %v", x.src, err)
		}
		got, err := e.Eval(context.Background(), map[string]any{"args": map[string]any{"text": x.body}, "mandate_provenance": map[string]any{}})
		if (err != nil) != x.err || got != x.want {
			t.Errorf("%s on %.20q = %v, %v; want %v (error: %v)", x.src, x.body, got, err, x.want, x.err)
		}
	}
}

// TestTextCost: the estimator knows the functions (a scan of the string
// and the list), so a huge body meets the cost limit.
func TestTextCost(t *testing.T) {
	c := New(WithCostLimit(1000))
	e, err := c.Compile(`urls(args.text).all(u, u.startsWith("https://"))`, []string{"args"})
	if err != nil {
		t.Fatal(err)
	}
	act := func(s string) map[string]any {
		return map[string]any{"args": map[string]any{"text": s}, "mandate_provenance": map[string]any{}}
	}
	if ok, err := e.Eval(context.Background(), act("https://x.example")); err != nil || !ok {
		t.Fatalf("small body = %v, %v; want true", ok, err)
	}
	if _, err := e.Eval(context.Background(), act(strings.Repeat("y", 100_000))); err == nil || !strings.Contains(err.Error(), "cost") {
		t.Fatalf("100 kB body under a cost limit of 1000: %v; want a cost error", err)
	}
}

func BenchmarkText(b *testing.B) {
	// 1 MiB of prose with a link, an address and an IBAN every ~1 KiB.
	var sb strings.Builder
	para := strings.Repeat("The quick brown fox jumps over the lazy dog, again and again. ", 15)
	for i := 0; sb.Len() < MaxTextLen-2048; i++ {
		fmt.Fprintf(&sb, "%s see https://site%d.example/p?q=%d or write to u%d@mail.example; IBAN DE89 3704 0044 0532 0130 00.\n", para, i%900, i%900, i%900)
	}
	s := sb.String()
	// What the kernel does once per blob a task reads, when a constraint
	// uses seen (kernel/seen.go): the three scans, up to its bound.
	b.Run("all-values", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(s)))
		for b.Loop() {
			FindValues(s, 4096)
		}
	})
	for name, f := range map[string]func(string) ([]string, error){"urls": URLs, "emails": Emails, "ibans": IBANs} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				if _, err := f(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
