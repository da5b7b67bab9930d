package mcp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

const narrowParent = `{"url":"https://a.example/mcp","tools":["read_*","list_directory","write_file"],
	"pins":{"read_text_file":"sha256:` + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" + `"},
	"results":{"read_*":{"labels":["pii:alice"],"taint":"fs:files"}},
	"costs":{"write_file":5},
	"clearance":["pii:alice","fin:alice"],"refuses_taints":["web:*"],
	"resources":["file:///data/*"],"prompts":["summarise","review_*"],
	"timeout":"1m","max_request_bytes":1000,"max_response_bytes":2000,"max_tools":50}`

// TestNarrow: a request that narrows gives a scope within the parent; one
// that would widen is EDENIED naming what widened; a malformed one is
// EINVAL.
func TestNarrow(t *testing.T) {
	k := New()
	parent, err := k.Grant(testGC, []byte(narrowParent))
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range []string{
		`{}`,
		`{"tools":["read_text_file"]}`,
		`{"tools":["read_t*","write_file"]}`,
		`{"tools":["read_*"]}`,
		`{"resources":["file:///data/public/*"],"prompts":["review_code"]}`,
		`{"clearance":["pii:alice"]}`,
		`{"clearance":[]}`,
		`{"refuses_taints":["web:*","mail:*"]}`,
		`{"accepts_untrusted":false}`,
		`{"timeout":"10s","max_request_bytes":10,"max_response_bytes":20,"max_tools":5}`,
		`{"pins":{"read_text_file":"sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}}`,
		`{"costs":{"write_file":5}}`,
		`{"results":{"read_*":{"labels":["pii:alice"],"taint":"fs:files"}}}`,
	} {
		child, ok := kerneltest.CheckNarrow(t, k, []kindapi.Scope{parent}, []byte(req))
		if !ok {
			t.Errorf("%s: refused", req)
			continue
		}
		// A narrowed scope narrows again by {} to itself.
		if again, ok := kerneltest.CheckNarrow(t, k, []kindapi.Scope{parent, child}, []byte(`{}`)); !ok || !child.Contains(again) || !again.Contains(child) {
			t.Errorf("%s: narrowing by {} is not the scope itself", req)
		}
	}
	for _, c := range []struct{ req, names string }{
		{`{"tools":["*"]}`, `tools "*"`},
		{`{"tools":["read_text_file","move_file"]}`, `tools "move_file"`},
		{`{"tools":["r*"]}`, `tools "r*"`},
		{`{"resources":["file:///*"]}`, `resources "file:///*"`},
		{`{"prompts":["*"]}`, `prompts "*"`},
		{`{"clearance":["pii:bob"]}`, "clearance"},
		{`{"refuses_taints":[]}`, "refuses_taints drops web:*"},
		{`{"timeout":"2m"}`, "timeout"},
		{`{"max_request_bytes":1001}`, "max_request_bytes"},
		{`{"max_response_bytes":2001}`, "max_response_bytes"},
		{`{"max_tools":51}`, "max_tools"},
		{`{"pins":{"read_text_file":"sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}}`, "pins are inherited"},
		{`{"costs":{"write_file":1}}`, "costs are inherited"},
		{`{"results":{"read_*":{"taint":"other"}}}`, "results are inherited"},
	} {
		_, err := k.Narrow(parent, []byte(c.req))
		if kindapi.ErrnoOf(err) != abi.EDENIED || !strings.Contains(err.Error(), c.names) {
			t.Errorf("%s: %v, want EDENIED naming %s", c.req, err, c.names)
		}
	}
	for _, req := range []string{`{"tools":"x"}`, `{"url":"https://b.example"}`, `{"timeout":"soon"}`, `{"max_tools":0}`, `not json`} {
		if _, err := k.Narrow(parent, []byte(req)); kindapi.ErrnoOf(err) != abi.EINVAL {
			t.Errorf("%s: %v, want EINVAL", req, err)
		}
	}
}

// TestNarrowPatterns: a pattern narrows only to names and patterns it
// matches, and the narrowed scope allows exactly what it names.
func TestNarrowPatterns(t *testing.T) {
	k := New()
	parent, _ := k.Grant(testGC, []byte(`{"url":"https://a.example/mcp","tools":["read_*","*_file"]}`))
	child, err := k.Narrow(parent, []byte(`{"tools":["read_*_x","write_file","*_text_file"]}`))
	if err != nil {
		t.Fatal(err)
	}
	c := child.(*Scope)
	for name, want := range map[string]bool{
		"read_a_x": true, "write_file": true, "read_text_file": true, "list_text_file": true,
		"read_a": false, "move_file": false, "write_files": false,
	} {
		if got := c.AllowsTool(name); got != want {
			t.Errorf("child allows %s: %v, want %v", name, got, want)
		}
		if c.AllowsTool(name) && !parent.(*Scope).AllowsTool(name) {
			t.Errorf("the child allows %s, which the parent does not", name)
		}
	}
}

// TestNarrowConsistency: for every combination of narrowing fields,
// Narrow and Contains agree (kerneltest.CheckNarrow), along chains.
func TestNarrowConsistency(t *testing.T) {
	k := New()
	root, err := k.Grant(testGC, []byte(narrowParent))
	if err != nil {
		t.Fatal(err)
	}
	options := map[string][]any{
		"tools":              {[]string{"read_*"}, []string{"read_text_file"}, []string{"*"}, []string{"write_file", "list_directory"}, []string{"read_a*", "read_*"}},
		"resources":          {[]string{"file:///data/*"}, []string{"file:///data/x"}, []string{"file:///*"}, []string{}},
		"prompts":            {[]string{"review_*"}, []string{"summarise"}, []string{"*"}},
		"clearance":          {[]string{"pii:alice"}, []string{}, []string{"pii:bob"}},
		"refuses_taints":     {[]string{"web:*"}, []string{"*"}, []string{}},
		"accepts_untrusted":  {true, false},
		"timeout":            {"1s", "1m", "5m"},
		"max_request_bytes":  {1, 1000, 5000},
		"max_response_bytes": {2000, 2001},
		"max_tools":          {1, 50, 51},
	}
	keys := make([]string, 0, len(options))
	for key := range options {
		keys = append(keys, key)
	}
	// Every single field, every pair of fields' first two options, and
	// chains of two narrowings.
	var reqs [][]byte
	for _, a := range keys {
		for _, v := range options[a] {
			b, _ := json.Marshal(map[string]any{a: v})
			reqs = append(reqs, b)
		}
		for _, b := range keys {
			if a >= b {
				continue
			}
			for _, va := range options[a][:2] {
				for _, vb := range options[b][:2] {
					r, _ := json.Marshal(map[string]any{a: va, b: vb})
					reqs = append(reqs, r)
				}
			}
		}
	}
	allowed := []abi.Errno{abi.EDENIED}
	for _, r1 := range reqs {
		child, ok := kerneltest.CheckNarrow(t, k, []kindapi.Scope{root}, r1, allowed...)
		if !ok {
			continue
		}
		for _, r2 := range reqs[:len(reqs)/4] {
			kerneltest.CheckNarrow(t, k, []kindapi.Scope{root, child}, r2, allowed...)
		}
	}
}

// TestContainsOtherServer: a scope never contains one of another server
// or another kind.
func TestContainsOtherServer(t *testing.T) {
	k := New()
	a, _ := k.Grant(testGC, []byte(`{"url":"https://a.example/mcp","tools":["*"]}`))
	b, _ := k.Grant(testGC, []byte(`{"url":"https://b.example/mcp","tools":["echo"]}`))
	if a.Contains(b) || b.Contains(a) {
		t.Error("a scope contains another server's")
	}
	other, err := kerneltest.New().Grant(kindapi.GrantContext{}, []byte(`{"level":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if a.Contains(nil) || a.Contains(other) || a.Contains((*Scope)(nil)) {
		t.Error("a scope contains nil or another kind's")
	}
}

// TestGlob: "*" matches any run of characters, every other character
// itself; the most specific pattern is an exact name, then the longest
// literal prefix.
func TestGlob(t *testing.T) {
	for _, c := range []struct {
		p, n string
		want bool
	}{
		{"*", "", true}, {"*", "abc", true}, {"a*", "a", true}, {"a*", "ba", false},
		{"*_file", "read_file", true}, {"*_file", "read_files", false}, {"a*b*c", "aXbYc", true},
		{"a*b*c", "aXbY", false}, {"a**", "a", true}, {"read_*_x", "read__x", true}, {"abc", "abc", true},
		{"abc", "abd", false}, {"a*a", "a", false}, {"*a*", "bab", true},
	} {
		if got := glob(c.p, c.n); got != c.want {
			t.Errorf("glob(%q, %q) = %v", c.p, c.n, got)
		}
	}
	for _, c := range []struct{ a, b string }{{"read_file", "read_*"}, {"read_*", "r*"}, {"read_*", "*_file"}, {"ab*", "a*b"}} {
		if !moreSpecific(c.a, c.b) || moreSpecific(c.b, c.a) {
			t.Errorf("%q is not more specific than %q", c.a, c.b)
		}
	}
}
