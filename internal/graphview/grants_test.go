package graphview

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

func fields(kv ...string) kernel.CapView {
	var v kernel.CapView
	for i := 0; i+1 < len(kv); i += 2 {
		v.Fields = append(v.Fields, kindapi.Detail{Name: kv[i], Value: kv[i+1]})
	}
	return v
}

// TestGrantsSummary: a run's root capabilities, by kind, short; derived
// ones are left out (they are narrower than a root).
func TestGrantsSummary(t *testing.T) {
	net1 := kernel.GraphCap{ID: "c1", Kind: "net", View: fields("origin", "https://api.example", "methods", "GET", "paths", "/")}
	net2 := kernel.GraphCap{ID: "c2", Kind: "net", View: fields("origin", "https://pay.example:8443", "methods", "GET,POST", "paths", "/v1")}
	data := kernel.GraphCap{ID: "c3", Kind: "data", View: fields("collection", "benefits", "records", "own", "fields", "plan", "ops", "query, read")}
	pay := kernel.GraphCap{ID: "c4", Kind: "pay", View: fields("provider", "http://127.0.0.1:9", "currency", "EUR", "max_amount", "50.00 EUR")}
	derived := kernel.GraphCap{ID: "c5", Kind: "net", Parent: "c1", View: fields("origin", "https://narrower.example", "methods", "GET")}
	orphan := kernel.GraphCap{ID: "c6", Kind: "llm", Parent: "c99", View: fields("endpoint", "http://m", "models", "small")}
	bare := kernel.GraphCap{ID: "c7", Kind: "custom"}
	for _, tc := range []struct {
		name string
		caps []kernel.GraphCap
		want string
	}{
		{"none", nil, ""},
		{"one", []kernel.GraphCap{data}, "data: benefits (query, read)"},
		{"grouped", []kernel.GraphCap{net1, data, net2, pay, derived},
			"net: GET api.example, GET/POST pay.example:8443; data: benefits (query, read); pay: ≤ 50.00 EUR"},
		{"same twice", []kernel.GraphCap{net1, {ID: "c9", Kind: "net", View: net1.View}}, "net: GET api.example"},
		{"orphan is a root, bare kind", []kernel.GraphCap{orphan, bare}, "llm: small; custom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := GrantsSummary(tc.caps, 0); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
	t.Run("long", func(t *testing.T) {
		var caps []kernel.GraphCap
		for i := range 30 {
			caps = append(caps, kernel.GraphCap{ID: "c" + string(rune('a'+i)), Kind: "net",
				View: fields("origin", "https://host-"+string(rune('a'+i))+".example", "methods", "GET")})
		}
		got := GrantsSummary(caps, 0)
		if n := utf8.RuneCountInString(got); n > MaxGrantsSummary || !strings.HasSuffix(got, " more") || !strings.HasPrefix(got, "net: GET host-a.example, ") {
			t.Errorf("%d runes: %q", n, got)
		}
		if got := GrantsSummary(caps, 40); utf8.RuneCountInString(got) > 40 || !strings.HasSuffix(got, " more") {
			t.Errorf("at most 40: %q", got)
		}
		one := []kernel.GraphCap{{ID: "c1", Kind: "data", View: fields("collection", strings.Repeat("x", 300))}}
		if got := GrantsSummary(one, 0); utf8.RuneCountInString(got) != MaxGrantsSummary || !strings.HasSuffix(got, "…") {
			t.Errorf("one long grant: %q", got)
		}
	})
	t.Run("escaped", func(t *testing.T) {
		c := kernel.GraphCap{ID: "c1", Kind: "data", View: fields("collection", "a\x1b[31m\nb")}
		if got := GrantsSummary([]kernel.GraphCap{c}, 0); strings.ContainsAny(got, "\x1b\n") {
			t.Errorf("not escaped: %q", got)
		}
	})
}
