package agent_test

import (
	"errors"
	"strings"
	"testing"

	mandate "github.com/mandatevm/mandate/guest-sdk"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/guest-sdk/agent"
)

// kernel stands in for the blob table the guest cannot read on the host:
// handle 42 holds the passport. Nothing in the loop can read it (on the
// host Blob.Bytes fails with ENOTSUP), and the test checks the value
// never reaches the model.
const passport = "X1234567"

var blobs = map[abi.Handle]string{42: passport, 43: "a second document", 44: "a third document"}

type sendArgs struct {
	To       string        `json:"to"`
	Passport agent.BlobRef `json:"passport" jsonschema:"the passport to send"`
	Note     string        `json:"note,omitempty"`
}

type fetched struct {
	Title string          `json:"title"`
	Body  agent.Reference `json:"body"`
}

func TestReferencesInsteadOfValues(t *testing.T) {
	type noArgs struct{}
	getPassport := agent.Tool("get_passport", "The traveller's passport.", func(*agent.Ctx, noArgs) (agent.Reference, error) {
		return agent.Ref("passport", mandate.BlobFromHandle(42)), nil
	})
	type fetchArgs struct {
		N int `json:"n"`
	}
	fetch := agent.Tool("fetch", "A document.", func(_ *agent.Ctx, a fetchArgs) (fetched, error) {
		// Nested in a result, and twice under one name: the second gets a suffix.
		return fetched{Title: "doc", Body: agent.Ref("doc", mandate.BlobFromHandle(abi.Handle(42+a.N)))}, nil
	})
	type sent struct {
		to, note string
		passport abi.Handle
		byNote   abi.Handle
		refs     []string
	}
	var got []sent
	send := agent.Tool("send", "Send a passport.", func(ctx *agent.Ctx, a sendArgs) (string, error) {
		s := sent{to: a.To, note: a.Note, passport: a.Passport.Handle(), refs: ctx.Refs()}
		if a.Note != "" {
			b, err := ctx.Ref(a.Note) // a plain string argument that names a reference
			if err != nil {
				return "", err
			}
			s.byNote = b.Handle()
		}
		got = append(got, s)
		if a.Passport.Name() != "$passport" {
			return "", errors.New("the BlobRef kept the wrong name: " + a.Passport.Name())
		}
		// The tool would splice it: net.Fetch(c, abi.HTTPRequest{...,
		// Splice: []abi.Handle{a.Passport.Handle()}}).
		return "sent", nil
	})
	m := &script{t: t, replies: []reply{
		calls(call("1", "get_passport", "{}"), call("2", "fetch", `{"n":1}`), call("3", "fetch", `{"n":2}`)),
		calls(
			call("4", "send", `{"to":"airline","passport":"$passport","note":"$doc_2"}`),
			call("5", "send", `{"to":"airline","passport":{"ref":"$passport"}}`), // as it was shown
			call("6", "send", `{"to":"airline","passport":"$pasport"}`),
			call("7", "send", `{"to":"airline","passport":"X7654321"}`), // a value, not a reference
			call("8", "send", `{"to":"airline","passport":42}`),
			call("9", "send", `{"to":"airline","passport":"$passport","note":"$nothing"}`),
		),
		text("Sent."),
	}}
	out, err := agent.RunWith(m, agent.Config{User: "Send the passport to the airline.",
		Tools: []agent.ToolDef{getPassport, fetch, send}, OnStep: quiet})
	if err != nil {
		t.Fatal(err)
	}

	// The model was shown names, never the bytes.
	first := toolMessages(m.reqs[1])
	for id, want := range map[string]string{
		"1": `{"ref":"$passport"}`,
		"2": `{"title":"doc","body":{"ref":"$doc"}}`,
		"3": `{"title":"doc","body":{"ref":"$doc_2"}}`,
	} {
		if first[id] != want {
			t.Errorf("call %s: the model was shown %q, want %q", id, first[id], want)
		}
	}
	for _, v := range blobs {
		if strings.Contains(m.seen(), v) {
			t.Errorf("the model was shown the content %q", v)
		}
	}

	// Later calls got the blobs by handle.
	if len(got) != 2 {
		t.Fatalf("send ran %d times, want 2: %+v", len(got), got)
	}
	if got[0].passport != 42 || got[0].byNote != 44 || got[1].passport != 42 || got[1].byNote != 0 {
		t.Errorf("resolved: %+v", got)
	}
	if strings.Join(got[0].refs, " ") != "$passport $doc $doc_2" {
		t.Errorf("ctx.Refs: %v", got[0].refs)
	}
	second := toolMessages(m.reqs[2])
	for id, want := range map[string]string{
		"4": "sent",
		"5": "sent",
		"6": `error: invalid arguments for send: $.passport: unknown reference "$pasport" (references: $doc, $doc_2, $passport)`,
		"7": `error: invalid arguments for send: $.passport: unknown reference "X7654321" (references: $doc, $doc_2, $passport)`,
		"8": `error: invalid arguments for send: $.passport: want a reference ("$name"), got an integer`,
		"9": `error: unknown reference "$nothing" (references: $doc, $doc_2, $passport)`,
	} {
		if second[id] != want {
			t.Errorf("call %s: the model was shown %q, want %q", id, second[id], want)
		}
	}
	if len(out.Refs) != 3 || out.Refs["$passport"].Handle() != 42 || out.Refs["$doc_2"].Handle() != 44 {
		t.Errorf("outcome refs: %v", out.Refs)
	}
}

func TestInitialReferences(t *testing.T) {
	var handle abi.Handle
	send := agent.Tool("send", "Send a passport.", func(_ *agent.Ctx, a sendArgs) (string, error) {
		handle = a.Passport.Handle()
		return "sent", nil
	})
	m := &script{t: t, replies: []reply{
		calls(call("1", "send", `{"to":"airline","passport":"$passport"}`)),
		text("done"),
	}}
	_, err := agent.RunWith(m, agent.Config{User: "Send $passport to the airline.",
		Refs:  []agent.Reference{agent.Ref("$passport", mandate.BlobFromHandle(42))},
		Tools: []agent.ToolDef{send}, OnStep: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if handle != 42 {
		t.Errorf("the tool got handle %d, want 42", handle)
	}
	if strings.Contains(m.seen(), passport) {
		t.Errorf("the model saw the passport")
	}

	_, err = agent.RunWith(m, agent.Config{User: "x", OnStep: quiet, Refs: []agent.Reference{
		agent.Ref("p", mandate.BlobFromHandle(1)), agent.Ref("$p", mandate.BlobFromHandle(2))}})
	if err == nil || !strings.Contains(err.Error(), "names $p twice") {
		t.Errorf("two initial references with one name: %v", err)
	}
}

func TestRefNames(t *testing.T) {
	for in, want := range map[string]string{
		"passport":   "$passport",
		"$passport":  "$passport",
		"my doc/1":   "$my_doc_1",
		"":           "$ref",
		"$":          "$ref",
		"été":        "$_t_",
		"a.b-c_d":    "$a.b-c_d",
		"{{mandate:": "$__mandate_",
	} {
		if got := agent.Ref(in, mandate.BlobFromHandle(1)).Name(); got != want {
			t.Errorf("Ref(%q).Name() = %q, want %q", in, got, want)
		}
	}
	// A reference to no blob is the tool's error, not the model's.
	type noArgs struct{}
	bad := agent.Tool("bad", "", func(*agent.Ctx, noArgs) (agent.Reference, error) {
		return agent.Ref("x", mandate.Blob{}), nil
	})
	m := &script{t: t, replies: []reply{calls(call("1", "bad", "{}")), text("ok")}}
	if _, err := agent.RunWith(m, agent.Config{User: "x", Tools: []agent.ToolDef{bad}, OnStep: quiet}); err != nil {
		t.Fatal(err)
	}
	if got := toolMessages(m.reqs[1])["1"]; got != "error: tool bad returned a result that cannot be shown: agent: a reference to no blob" {
		t.Errorf("a reference to no blob: %q", got)
	}
}
