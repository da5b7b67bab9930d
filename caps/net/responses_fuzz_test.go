package net

import (
	"encoding/json"
	"testing"

	"github.com/mandatevm/mandate/kernel/kindapi"
)

// FuzzResponses: a grant's responses never panic the kind; granted ones
// survive the scope's JSON (granted again they are the same, repeated in
// a narrowing request they are accepted and change nothing), and a
// response fetched from any path, with any body, gets a label with a
// taint and part labels a blob accepts, each part with its one taint.
func FuzzResponses(f *testing.F) {
	for _, s := range []struct{ responses, path, body string }{
		{`{"/transactions":{"taint":"bank:tx","labels":["pii:alice"],"fields":{"$.transactions[*].sender":"bank:transactions.sender"}}}`,
			"/transactions", `{"transactions":[{"sender":"GB29","subject":"hi"}]}`},
		{`{"/a":{"fields":{"$.x[*]":{"taint":"t","labels":["c"]},"$.x[0].y":"u","$[\"q\"]":"v"}},"/a/b":{}}`, "/a/b/c", `[1,2]`},
		{`{"/":{"taint":"x","fields":{"$":"y"}}}`, "/", `"s"`},
		{`{"/a":{"fields":{"$.t[*]":"x","$.t[0]":"y"}}}`, "/a", `{}`},
		{`{"/a":"x"}`, "/a", ``},
		{`[]`, "/", ``},
	} {
		f.Add([]byte(s.responses), s.path, []byte(s.body))
	}
	k := New()
	gc := kindapi.GrantContext{Dir: f.TempDir()}
	f.Fuzz(func(t *testing.T, responses []byte, path string, body []byte) {
		spec := append(append([]byte(`{"origin":"https://bank.example","responses":`), responses...), '}')
		sc, err := k.Grant(gc, spec)
		if err != nil {
			return
		}
		s := sc.(*Scope)
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var js struct {
			Responses json.RawMessage `json:"responses"`
		}
		if err := json.Unmarshal(b, &js); err != nil {
			t.Fatal(err)
		}
		if len(s.responses) == 0 {
			if js.Responses != nil {
				t.Fatalf("no entries, but the JSON shows %s", js.Responses)
			}
			return
		}
		again, err := k.Grant(gc, append(append([]byte(`{"origin":"https://bank.example","responses":`), js.Responses...), '}'))
		if err != nil || !equalResponses(again.(*Scope).responses, s.responses) {
			t.Fatalf("the JSON form %s grants %v, %v; want the same entries", js.Responses, again, err)
		}
		child, err := k.Narrow(s, append(append([]byte(`{"responses":`), js.Responses...), '}'))
		if err != nil || !s.Contains(child) || !child.(*Scope).Contains(s) {
			t.Fatalf("repeating the responses in a narrowing: %v, %v", child, err)
		}
		cp, err := canonPath(path)
		if err != nil {
			return
		}
		label, parts := s.responseLabels(cp, body)
		if len(label.Integ()) != 1 {
			t.Fatalf("label %v of %s: want one taint", label, cp)
		}
		blob, err := kindapi.NewBlobParts(body, label, parts)
		if err != nil {
			t.Fatalf("parts %v: %v", parts, err)
		}
		for _, p := range parts {
			if len(p.Label.Integ()) != 1 || !label.CanFlowTo(p.Label) {
				t.Fatalf("part %v of label %v: want one taint and at least the response's confidentiality", p, label)
			}
		}
		if !label.CanFlowTo(blob.Label()) || len(blob.Label().Integ()) < 1 {
			t.Fatalf("blob label %v below the response's %v", blob.Label(), label)
		}
	})
}
