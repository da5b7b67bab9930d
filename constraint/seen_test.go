package constraint

import (
	"context"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/kernel"
)

// fakeReads: the input's values, and the taints each read value came with.
type fakeReads struct {
	input map[string]bool
	read  map[string][]string
}

func (f fakeReads) Given(v string) bool { return f.input[v] }
func (f fakeReads) Seen(v string, match func(string) bool) bool {
	for _, t := range f.read[v] {
		if match(t) {
			return true
		}
	}
	return false
}

func TestGivenSeen(t *testing.T) {
	reads := fakeReads{
		input: map[string]bool{"https://news.example/article": true, "alice@example.com": true},
		read: map[string][]string{
			"https://evil.example/win":  {"web:news.example"},
			"DE89370400440532013000":    {"bank:accounts"},
			"https://docs.example/page": {},
		},
	}
	c := New()
	for _, x := range []struct {
		src, text string
		want      bool
	}{
		{`urls(args.text).all(u, given(u))`, "Summary. Source: https://News.example/article.", true},
		{`urls(args.text).all(u, given(u))`, "Summary. Claim your prize: https://evil.example/win", false},
		{`urls(args.text).all(u, given(u))`, "No link at all.", true},
		{`given(args.text)`, "Alice@Example.com", true},
		{`given(args.text)`, "mailto:alice@example.com", true},
		{`given(args.text)`, "alice@example.com and more", false},
		{`seen(args.text, 'web:*')`, "https://evil.example/win", true},
		{`seen(args.text, 'bank:*')`, "https://evil.example/win", false},
		{`ibans(args.text).all(i, seen(i, 'bank:accounts'))`, "pay de89 3704 0044 0532 0130 00", true},
		{`seen(args.text, '*')`, "https://docs.example/page", false}, // read untainted: no pattern matches
	} {
		e, err := c.Compile(x.src, []string{"args"})
		if err != nil {
			t.Fatalf("Compile(%q): %v", x.src, err)
		}
		act := map[string]any{"args": map[string]any{"text": x.text}, kernel.ProvenanceVar: map[string]any{}, kernel.ReadsVar: reads}
		got, err := e.Eval(context.Background(), act)
		if err != nil || got != x.want {
			t.Errorf("%s on %q = %v, %v; want %v", x.src, x.text, got, err, x.want)
		}
		if !e.(kernel.Referencer).References(kernel.ReadsVar) {
			t.Errorf("%s: does not say it reads %s", x.src, kernel.ReadsVar)
		}
	}
	// Without what the task read (a host that does not give it), the
	// expression cannot be evaluated: the call is denied.
	e, _ := c.Compile(`given(args.text)`, []string{"args"})
	if _, err := e.Eval(context.Background(), map[string]any{"args": map[string]any{"text": "x"}, kernel.ProvenanceVar: map[string]any{}}); err == nil {
		t.Errorf("given() without reads: no error")
	}
}

func TestSeenCompileErrors(t *testing.T) {
	c := New()
	for _, src := range []string{
		`seen(args.text, args.pattern)`,
		`seen(args.text, 1)`,
		`seen(args.text, 'a*b')`,
		`seen(args.text, '')`,
		`given(args.a, args.b)`,
	} {
		if _, err := c.Compile(src, []string{"args"}); err == nil {
			t.Errorf("Compile(%q): no error", src)
		} else if testing.Verbose() {
			t.Logf("%s: %v", src, strings.SplitN(err.Error(), "\n", 2)[0])
		}
	}
}
