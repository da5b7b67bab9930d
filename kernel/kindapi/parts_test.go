package kindapi

import (
	"strings"
	"testing"
)

func TestParsePath(t *testing.T) {
	for src, want := range map[string]string{
		"$": "$", "$.a.b": "$.a.b", `$["a b"][0].c`: `$["a b"][0].c`, "$.a[*].b": "$.a[*].b", "$.*": "$[*]", `$['x']`: "$.x",
	} {
		p, err := ParsePath(src, true)
		if err != nil || p.String() != want {
			t.Errorf("%s: %v %v, want %s", src, p, err, want)
		}
	}
	for _, bad := range []string{"", "a", "$.", "$[", "$[-1]", "$[01]", `$["a"b"]`, "$..a", "$.a[x]"} {
		if _, err := ParsePath(bad, true); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if _, err := ParsePath("$.a[*]", false); err == nil {
		t.Error("a wildcard outside a pattern parsed")
	}
}

func TestExtractAndPartLabels(t *testing.T) {
	doc := []byte(`{"tx":[{"sender":"A","subject":"hi","n":1.50}],"k":{"x":[true]}}`)
	must := func(s string) Path {
		p, err := ParsePath(s, false)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for path, want := range map[string]string{
		"$.tx[0].sender": `"A"`, "$.tx[0].n": `1.50`, "$.k": `{"x":[true]}`, "$": string(doc),
	} {
		got, err := must(path).Extract(doc)
		if err != nil || string(got) != want {
			t.Errorf("%s: %s %v, want %s", path, got, err, want)
		}
	}
	for _, path := range []string{"$.tx[1]", "$.nope", "$.tx.sender", "$.k.x[0].y"} {
		if _, err := must(path).Extract(doc); err == nil {
			t.Errorf("%s extracted", path)
		}
	}
	base := NewLabel(nil, []string{"bank:tx"})
	sender := NewLabel(nil, []string{"bank:sender"})
	b, err := NewBlobParts(doc, base, []PartLabel{{Pattern: "$.tx[*].sender", Label: sender}})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Label(); len(got.Integ()) != 2 {
		t.Errorf("the whole blob: %v, want both taints", got)
	}
	for path, want := range map[string]Label{
		"$.tx[0].sender": sender, "$.tx[3].sender": sender, "$.tx[0].subject": base, "$.k": base,
		"$.tx[0]": base.Join(sender), "$": base.Join(sender),
	} {
		if got := b.PartLabel(must(path)); got != want {
			t.Errorf("%s: %v, want %v", path, got, want)
		}
	}
}

func FuzzPaths(f *testing.F) {
	f.Add("$.a[0].b", `{"a":[{"b":1}]}`)
	f.Add(`$["x"][*]`, `[]`)
	f.Fuzz(func(t *testing.T, path, doc string) {
		p, err := ParsePath(path, true)
		if err != nil {
			return
		}
		q, err := ParsePath(p.String(), true)
		if err != nil || q.String() != p.String() {
			t.Fatalf("%q -> %q -> %v %v", path, p.String(), q, err)
		}
		_, _ = p.Extract([]byte(doc))
		b, err := NewBlobParts([]byte(doc), Label{}, []PartLabel{{Pattern: path, Label: NewLabel([]string{"c"}, nil)}})
		if err != nil {
			t.Fatal(err)
		}
		_ = b.PartLabel(p)
	})
}

// TestExtractRefusesAmbiguousDocuments: a part is read out of a document
// only when abi.CheckJSON accepts it: with a key given twice (escaped or
// not) encoding/json would hand on the last value while a reader of the
// document (or its part labels' author) may mean the first, and a lone
// surrogate or invalid UTF-8 would be read as U+FFFD.
func TestExtractRefusesAmbiguousDocuments(t *testing.T) {
	p, err := ParsePath("$.tx[0].sender", false)
	if err != nil {
		t.Fatal(err)
	}
	for doc, why := range map[string]string{
		`{"tx":[{"sender":"bank","sender":"attacker"}]}`:      `duplicate key "sender"`,
		`{"tx":[{"sender":"bank","s\u0065nder":"attacker"}]}`: `duplicate key "sender"`,
		`{"tx":[{"sender":"bank"}],"tx":[{"sender":"x"}]}`:    `duplicate key "tx"`,
		`{"tx":[{"sender":"bank","note":"\ud800"}]}`:          "surrogate",
		"{\"tx\":[{\"sender\":\"bank\",\"note\":\"\xff\"}]}":  "UTF-8",
		`{"tx":[{"sender":"bank"}]} {"tx":[{"sender":"x"}]}`:  "trailing data",
	} {
		got, err := p.Extract([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), why) || !strings.HasPrefix(err.Error(), "$.tx[0].sender: ") {
			t.Errorf("%s: extracted %s, %v; want an error naming the path and %q", doc, got, err, why)
		}
	}
	if got, err := p.Extract([]byte(`{"tx":[{"s\u0065nder":"bank"}]}`)); err != nil || string(got) != `"bank"` {
		t.Errorf("an escaped key, given once: %s, %v", got, err)
	}
}
