package agent_test

import (
	"encoding/json"
	"strings"
	"testing"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/agent"
)

type fuzzArgs struct {
	Flight  string             `json:"flight"`
	People  []person           `json:"people"`
	Seats   [2]int16           `json:"seats"`
	Doc     agent.BlobRef      `json:"doc"`
	Docs    []agent.BlobRef    `json:"docs,omitempty"`
	Note    *string            `json:"note"`
	Tags    map[string]uint8   `json:"tags,omitempty"`
	Extra   json.RawMessage    `json:"extra,omitempty"`
	Count   int64              `json:"count,string,omitempty"`
	Nested  *fuzzArgs2         `json:"nested,omitempty"`
	Anyway  any                `json:"anyway,omitempty"`
	Numbers map[string]float64 `json:"numbers,omitempty"`
}

type fuzzArgs2 struct {
	Deep []map[string][]bool `json:"deep"`
}

// FuzzToolArguments: whatever a model writes as a tool's arguments, the
// loop does not panic, the tool runs only with arguments that fit the
// schema (every BlobRef resolved to a reference the run holds), and the
// model is answered for every call.
func FuzzToolArguments(f *testing.F) {
	for _, s := range []string{
		`{"flight":"TP1","people":[{"name":"a","age":3}],"seats":[1,2],"doc":"$doc","note":null}`,
		`{"flight":"TP1","people":[],"seats":[1,2],"doc":{"ref":"$doc"},"docs":["$doc","$nope"],"note":"x","count":"12"}`,
		`{"flight":"TP1","people":[],"seats":[1,2],"doc":"$doc","note":null,"nested":{"deep":[{"a":[true]}]},"extra":[1,{"x":null}]}`,
		`{"flight":"","people":null,"seats":[70000,1],"doc":"$doc","note":null}`,
		`{"flight":"\ud800","people":[],"seats":[1,2],"doc":"$doc","note":null}`,
		`{"a":1,"a":2}`, ``, `null`, `[`, `{"doc":"$doc"}`, `{"flight":1e400}`,
	} {
		f.Add(s)
	}
	f.Fuzz(fuzzOnce)
}

func fuzzOnce(t *testing.T, args string) {
	var got *fuzzArgs
	tool := agent.Tool("t", "", func(_ *agent.Ctx, a fuzzArgs) (string, error) {
		got = &a
		return "ok", nil
	})
	m := &script{t: t, replies: []reply{calls(call("1", "t", args)), text("done")}}
	_, err := agent.RunWith(m, agent.Config{User: "x", Tools: []agent.ToolDef{tool}, OnStep: quiet,
		Refs: []agent.Reference{agent.Ref("doc", mandate.BlobFromHandle(5))}})
	if err != nil {
		t.Fatal(err)
	}
	msg := toolMessages(m.reqs[1])["1"]
	switch {
	case got == nil && !strings.HasPrefix(msg, "error: invalid arguments for t: "):
		t.Fatalf("the tool did not run, and the model was shown %q", msg)
	case got != nil && msg != "ok":
		t.Fatalf("the tool ran, and the model was shown %q", msg)
	case got != nil:
		if got.Doc.Handle() != 5 {
			t.Fatalf("doc resolved to %d", got.Doc.Handle())
		}
		for _, d := range got.Docs {
			if d.Handle() != 5 {
				t.Fatalf("docs resolved to %d", d.Handle())
			}
		}
	}
	// The arguments repeated to the model are its own, or {}.
	if a := m.reqs[1].Messages[1].ToolCalls[0].Function.Arguments; a != args && a != "{}" {
		t.Fatalf("arguments repeated as %q", a)
	}
}
