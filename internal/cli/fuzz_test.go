package cli

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// FuzzDecodeRecord: any graph a record may hold is rendered by every
// renderer, showing every task and
// capability (each once, however the parent links are corrupted).
func FuzzDecodeRecord(f *testing.F) {
	good, err := json.Marshal(sampleRecord())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	for _, s := range []string{
		`{"version":1,"run":{"id":"r"},"tasks":[],"caps":[]}`,
		`{"version":1,"run":{"id":"r"},"tasks":[{"id":"a","parent":"a"}],"caps":[{"id":"c","parent":"c","scope":[1]}]}`,
		`{"version":1,"tasks":[{"id":"a","parent":"b"},{"id":"b","parent":"c"},{"id":"c"}],"caps":[{"id":"x","parent":"y"},{"id":"y","parent":"x"}]}`,
		`{"version":1,"tasks":[{"id":"a","label":{"conf":["x"]},"clearance":{"conf":[]}}],"caps":[{"id":"c","scope":"s","holder":"a"}]}`,
		`{"version":2,"tasks":[],"caps":[]}`, `{"version":1}`, `{"version":1,"tasks":[{"id":""}],"caps":[]}`, `[`, `null`,
		`{"version":1,"run":{"started":"2026-11-29T15:30:00Z","ended":"0001-01-01T00:00:00Z"},"tasks":[],"caps":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// Records now come from the run store, whose reads check every
		// column; the renderers must still cope with any graph.
		var r *Record
		if err := json.Unmarshal(b, &r); err != nil || r == nil {
			return
		}
		if err := renderJSON(io.Discard, r); err != nil {
			t.Fatalf("renderJSON(%q): %v", b, err)
		}
		if err := renderDOT(io.Discard, r); err != nil {
			t.Fatalf("renderDOT(%q): %v", b, err)
		}
		var text strings.Builder
		if err := renderText(&text, r); err != nil {
			t.Fatalf("renderText(%q): %v", b, err)
		}
		out := text.String()
		taskParent, capParent := map[string]string{}, map[string]string{}
		for _, x := range r.Tasks {
			taskParent[x.ID] = x.Parent
		}
		for _, x := range r.Caps {
			capParent[x.ID] = x.Parent
		}
		for _, x := range r.Tasks {
			if !strings.Contains(out, x.ID) {
				t.Fatalf("renderText(%q) leaves out task %q:\n%s", b, x.ID, out)
			}
		}
		for _, x := range r.Caps {
			if !strings.Contains(out, x.ID) {
				t.Fatalf("renderText(%q) leaves out cap %q:\n%s", b, x.ID, out)
			}
		}
	})
}

// FuzzScopeSummary: a scope from a record renders without panicking, the
// same each time.
//
// It is one line: a value with a newline once split a capability's line in
// `mandate graph` (crasher kept in testdata/fuzz/FuzzScopeSummary/).
func FuzzScopeSummary(f *testing.F) {
	for _, s := range []string{
		`{"origin":"https://flights.example","methods":["GET","POST"],"paths":[],"allow_private":false,"timeout":"30s","max_redirects":5}`,
		`{"a":{"b":[1,{"c":null}]},"n":0,"f":1.5e300,"s":"x\ny"}`, `[1,2]`, `"x"`, `{`, ``, `null`, `{"a":1e400}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, again := scopeSummary(b), scopeSummary(b)
		if s != again {
			t.Fatalf("scopeSummary(%q) = %q, then %q", b, s, again)
		}
		if strings.ContainsAny(s, "\n\r") {
			t.Fatalf("scopeSummary(%q) = %q: more than one line", b, s)
		}
	})
}
