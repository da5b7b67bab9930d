package kindapi

import (
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
