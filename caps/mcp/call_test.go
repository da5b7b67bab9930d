package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// result is a call's result blob.
type result struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent map[string]any `json:"structuredContent"`
	IsError           bool           `json:"isError"`
}

func decode(t testing.TB, b []byte) result {
	t.Helper()
	var r result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("result %q: %v", b, err)
	}
	return r
}

// TestCallAllowed: an allowed call reaches the server and comes back as
// its CallToolResult, tainted by the upstream; a tool's own failure is a
// result, not an errno; over HTTP and over stdio.
func TestCallAllowed(t *testing.T) {
	for _, transport := range []string{"http", "stdio"} {
		t.Run(transport, func(t *testing.T) {
			e := newKenv(t)
			var base map[string]any
			var taint string
			if transport == "http" {
				url := newTestServer(t).startHTTP(t)
				base, taint = httpBase(url), "mcp:"+url
			} else {
				base, taint = stdioBase(t), "mcp:stdio:"+strings.TrimSuffix(strings.TrimSuffix(exeBase(t), ".exe"), "")
			}
			kt := e.start(kgrant{name: "up", spec: specOf(t, base, e.pinned(base, "echo", "fail"))})
			b, label := kt.mustCall("up", "echo", map[string]any{"text": "hello"})
			r := decode(t, b)
			if len(r.Content) != 1 || r.Content[0].Type != "text" || r.Content[0].Text != "hello" || r.IsError ||
				r.StructuredContent["text"] != "hello" || r.StructuredContent["owner"] != "alice" {
				t.Errorf("result %s", b)
			}
			if !slices.Equal(label.Integ(), []string{taint}) || len(label.Conf()) != 0 {
				t.Errorf("label %v, want the taint %s only", label, taint)
			}
			b, _ = kt.mustCall("up", "fail", nil)
			if r := decode(t, b); !r.IsError || r.Content[0].Text != "it failed" {
				t.Errorf("a tool's failure: %s", b)
			}
		})
	}
}

func exeBase(t testing.TB) string {
	base := stdioBase(t)["command"].([]string)[0]
	return base[strings.LastIndexByte(base, '/')+1:]
}

// TestCallNotGranted: a tool the grant does not name is refused before
// anything is sent: the server sees no request at all.
func TestCallNotGranted(t *testing.T) {
	ts := newTestServer(t)
	url := ts.startHTTP(t)
	e := newKenv(t)
	kt := e.start(kgrant{name: "up", spec: specOf(t, httpBase(url), map[string]any{"tools": []string{"echo", "read_*"}})})
	err := kt.refused("up", "write", map[string]any{"path": "/etc/passwd"}, abi.EDENIED)
	if !strings.Contains(err.Error(), `tool "write" is not granted`) {
		t.Errorf("error %v", err)
	}
	for _, args := range []any{"not json", map[string]any{"arguments": map[string]any{}}, map[string]any{"tool": "echo", "arguments": []int{1}}} {
		b, ok := args.(string)
		var raw any = args
		if ok {
			raw = []byte(b)
		}
		if _, err := kt.invoke("up", OpCall, raw); kindapi.ErrnoOf(err) != abi.EINVAL {
			t.Errorf("call %v: %v, want EINVAL", args, err)
		}
	}
	if _, err := kt.invoke("up", "delete", map[string]any{}); kindapi.ErrnoOf(err) != abi.ENOTSUP {
		t.Errorf("an unknown operation: %v", err)
	}
	if m := ts.Methods(); len(m) != 0 {
		t.Errorf("the server received %v", m)
	}
}

// TestCallWhen: a grant's when on the arguments refuses a call before it
// is sent, and allows one that holds.
func TestCallWhen(t *testing.T) {
	ts := newTestServer(t)
	url := ts.startHTTP(t)
	e := newKenv(t)
	base := httpBase(url)
	kt := e.start(kgrant{name: "w", spec: specOf(t, base, e.pinned(base, "write")),
		when: []string{"tool == 'write' && args.path.startsWith('/data/public/')"}})
	b, _ := kt.mustCall("w", "write", map[string]any{"path": "/data/public/a", "content": "x"})
	if !strings.Contains(string(b), "wrote /data/public/a") {
		t.Errorf("result %s", b)
	}
	kt.refused("w", "write", map[string]any{"path": "/data/private/a", "content": "x"}, abi.EDENIED)
	kt.refused("w", "write", map[string]any{"content": "no path"}, abi.EDENIED)
	if got := ts.Calls(); !slices.Equal(got, []string{"write"}) {
		t.Errorf("the server ran %v, want the one allowed write", got)
	}
}

// TestCallLabels: a results entry labels a tool's results, and a field of
// them apart; the most specific entry wins; other tools keep the default.
func TestCallLabels(t *testing.T) {
	url := newTestServer(t).startHTTP(t)
	e := newKenv(t)
	base := httpBase(url)
	fields := e.pinned(base, "echo", "fail")
	fields["results"] = map[string]any{
		"*":    map[string]any{"taint": "t:any"},
		"e*":   map[string]any{"taint": "t:e"},
		"echo": map[string]any{"labels": []string{"pii:alice"}, "taint": "t:echo", "fields": map[string]any{"$.structuredContent.owner": "t:owner"}},
	}
	fields["clearance"] = []string{"pii:alice"}
	kt := e.start(kgrant{name: "up", spec: specOf(t, base, fields)})
	h, err := kt.invoke("up", OpCall, map[string]any{"tool": "echo", "arguments": map[string]any{"text": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	part, err := kt.task.BlobPart(ctx, h, "$.structuredContent.owner", "")
	if err != nil {
		t.Fatal(err)
	}
	pl, _ := kt.task.BlobLabel(part)
	if !slices.Equal(pl.Integ(), []string{"t:owner"}) || !slices.Equal(pl.Conf(), []string{"pii:alice"}) {
		t.Errorf("the owner's label %v, want {pii:alice; t:owner}", pl)
	}
	// The content mirrors structuredContent: it carries the field's label
	// too.
	text, err := kt.task.BlobPart(ctx, h, "$.content[0].text", "")
	if err != nil {
		t.Fatal(err)
	}
	if tl, _ := kt.task.BlobLabel(text); !slices.Contains(tl.Integ(), "t:owner") || !slices.Contains(tl.Integ(), "t:echo") {
		t.Errorf("the content's label %v, want the field's taint with the entry's", tl)
	}
	_, label, err := kt.read(h)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(label.Integ(), "t:echo") || !slices.Contains(label.Conf(), "pii:alice") || slices.Contains(label.Integ(), "t:e") {
		t.Errorf("the result's label %v", label)
	}
	if !slices.Contains(kt.task.Label().Conf(), "pii:alice") {
		t.Errorf("reading the result left the task at %v", kt.task.Label())
	}
	_, label, err = kt.call("up", "fail", nil)
	if err != nil || !slices.Contains(label.Integ(), "t:any") || slices.Contains(label.Integ(), "mcp:"+url) {
		t.Errorf("fail's label %v (%v), want the * entry's", label, err)
	}
}

// TestCallFlow: a task labelled pii:alice calling a server not cleared
// for it is refused EFLOW, and the server sees no call; a cleared one
// gets it.
func TestCallFlow(t *testing.T) {
	ts := newTestServer(t)
	url := ts.startHTTP(t)
	e := newKenv(t)
	base := httpBase(url)
	pins := e.pinned(base, "echo")
	labelled := specOf(t, base, pins, map[string]any{"clearance": []string{"pii:alice"},
		"results": map[string]any{"echo": map[string]any{"labels": []string{"pii:alice"}}}})
	kt := e.start(kgrant{name: "cleared", spec: labelled}, kgrant{name: "public", spec: specOf(t, base, pins)})
	kt.mustCall("public", "echo", map[string]any{"text": "before"})
	kt.mustCall("cleared", "echo", map[string]any{"text": "the secret"}) // read: the task is now pii:alice
	before := ts.Calls()
	kt.refused("public", "echo", map[string]any{"text": "leak"}, abi.EFLOW)
	if got := ts.Calls(); len(got) != len(before) {
		t.Errorf("the uncleared server was called: %v", got)
	}
	kt.mustCall("cleared", "echo", map[string]any{"text": "fine"})

	// A blob spliced by a task that never read it flows the same way.
	kt2 := e.start(kgrant{name: "cleared", spec: labelled}, kgrant{name: "public", spec: specOf(t, base, pins)})
	h, err := kt2.invoke("cleared", OpCall, map[string]any{"tool": "echo", "arguments": map[string]any{"text": "passport X1"}})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = kt2.op("public", OpCall, map[string]any{"tool": "echo", "arguments": map[string]any{"text": "{{mandate:splice:0}}"}, "splice": []abi.Handle{h}})
	if kindapi.ErrnoOf(err) != abi.EFLOW {
		t.Errorf("a labelled blob spliced to an uncleared server: %v, want EFLOW", err)
	}
	b, label, err := kt2.op("cleared", OpCall, map[string]any{"tool": "echo", "arguments": map[string]any{"text": "got {{mandate:splice:0}}"}, "splice": []abi.Handle{h}})
	if err != nil || !strings.Contains(string(b), `got {\"content\"`) || !slices.Contains(label.Conf(), "pii:alice") {
		t.Errorf("splice to the cleared server: %s %v %v", b, label, err)
	}
}

// TestCallSecretHeader: a header's secret reaches the server, and is in no
// result (a server reflecting it is withheld), error, log line or scope
// JSON.
func TestCallSecretHeader(t *testing.T) {
	ts := newTestServer(t)
	url := ts.startHTTP(t)
	e := newKenv(t)
	base := httpBase(url)
	base["headers"] = []any{map[string]any{"name": "Authorization", "env": "MCP_TOKEN", "prefix": "Bearer "}}
	kt := e.start(kgrant{name: "up", spec: specOf(t, base, e.pinned(base, "echo"), map[string]any{"tools": []string{"echo", "write"}})})
	b, _ := kt.mustCall("up", "echo", map[string]any{"text": "hi"})
	if got := ts.Auth(); len(got) == 0 || !slices.Contains(got, "Bearer "+testSecret) {
		t.Errorf("the server got Authorization %q", got)
	}
	errs := []error{kt.refused("up", "write", map[string]any{}, abi.EDENIED)} // not pinned
	errs = append(errs, kt.refused("up", "echo", map[string]any{"text": testSecret}, abi.EIO))
	// Reflected in base64 (as an image's data would be).
	errs = append(errs, kt.refused("up", "echo", map[string]any{"text": base64.StdEncoding.EncodeToString([]byte(testSecret))}, abi.EIO))
	for _, err := range errs {
		if strings.Contains(err.Error(), testSecret) {
			t.Errorf("the error holds the secret: %v", err)
		}
	}
	sj, _ := json.Marshal(kt.scope("up"))
	for _, text := range []string{string(b), string(sj), e.logs.String()} {
		if strings.Contains(text, testSecret) {
			t.Errorf("the secret is in %.200s", text)
		}
	}
}

// TestStdioEnv: a stdio server sees exactly the variables env names, with
// mandate's values, and nothing else of mandate's environment.
func TestStdioEnv(t *testing.T) {
	t.Setenv("MANDATE_MCP_HIDDEN", "not for the server")
	e := newKenv(t)
	base := stdioBase(t)
	kt := e.start(kgrant{name: "s", spec: specOf(t, base, e.pinned(base, "env"))})
	b, _ := kt.mustCall("s", "env", nil)
	var env []string
	for _, v := range decode(t, b).StructuredContent["env"].([]any) {
		env = append(env, v.(string))
	}
	slices.Sort(env)
	if want := []string{stdioEnv + "=1", "VISIBLE=shown-to-the-server"}; !slices.Equal(env, want) {
		t.Errorf("the server's environment is %q, want %q", env, want)
	}
}

// TestCallCosts: costs weigh a call against the grant's budget (in
// calls); a tool without an entry costs one.
func TestCallCosts(t *testing.T) {
	ts := newTestServer(t)
	url := ts.startHTTP(t)
	e := newKenv(t)
	base := httpBase(url)
	kt := e.start(kgrant{name: "up", budget: "5", spec: specOf(t, base, e.pinned(base, "echo", "write"), map[string]any{"costs": map[string]any{"write": 3}})})
	kt.mustCall("up", "write", map[string]any{"path": "/a"})
	kt.refused("up", "write", map[string]any{"path": "/b"}, abi.ELIMIT)
	kt.mustCall("up", "echo", map[string]any{"text": "1"})
	kt.mustCall("up", "echo", map[string]any{"text": "2"})
	kt.refused("up", "echo", map[string]any{"text": "3"}, abi.ELIMIT)
	if got := count(ts.Calls(), "write"); got != 1 {
		t.Errorf("%d writes ran", got)
	}
}

// TestCallAccount: a call's account names the tool and the upstream, and
// the arguments as the task wrote them, splices as "[spliced N]"; its
// constraint variables have the splices in, and a part's provenance.
func TestCallAccount(t *testing.T) {
	k := New()
	sc, err := k.Grant(testGC, []byte(`{"url":"https://a.example/mcp","tools":["send"],"clearance":["pii:alice"]}`))
	if err != nil {
		t.Fatal(err)
	}
	blobs := []*kindapi.Blob{
		kindapi.NewBlob([]byte("X1234567"), kindapi.NewLabel([]string{"pii:alice"}, nil)),
		kindapi.NewBlob([]byte(`{"iban":"GB33"}`), kindapi.NewLabel(nil, []string{"bank:tx"})),
	}
	var call kindapi.Call
	args := `{"tool":"send","arguments":{"to":"{{mandate:part:0}}","note":"passport {{mandate:splice:0}}"},"splice":[1],"splice_parts":[{"blob":2,"path":"$.iban"}]}`
	call.Init(OpCall, []byte(args), sc, kindapi.TaskInfo{}, nil, func(h abi.Handle) (*kindapi.Blob, error) {
		if h < 1 || int(h) > len(blobs) {
			return nil, kindapi.ErrBadHandle
		}
		return blobs[h-1], nil
	}, func() kindapi.Label { return kindapi.Label{} })
	op, err := k.Prepare(&call)
	if err != nil {
		t.Fatal(err)
	}
	a := op.Account()
	if a.Action != "call send on https://a.example/mcp" || a.Written != ` {"note":"passport [spliced 0]","to":"[spliced part 0]"}` {
		t.Errorf("account %+v", a)
	}
	if op.Sink == nil || !slices.Equal(op.Sink.Clearance.Conf(), []string{"pii:alice"}) || op.Amount != 1 {
		t.Errorf("sink %+v amount %d", op.Sink, op.Amount)
	}
	vars, err := op.Vars()
	if err != nil {
		t.Fatal(err)
	}
	if vars["tool"] != "send" {
		t.Errorf("vars %v", vars)
	}
	am := vars["args"].(map[string]any)
	if am["to"] != "GB33" || am["note"] != "passport X1234567" {
		t.Errorf("args %v", am)
	}
	if src, ok := op.Provenance["args.to"]; !ok || !slices.Equal(src.Label.Integ(), []string{"bank:tx"}) || src.Path != "$.iban" {
		t.Errorf("provenance %+v", op.Provenance)
	}
	if p := op.Show(); p.Summary != "call send on https://a.example/mcp" || strings.Contains(p.Summary+p.Details[2].Value, "X1234567") {
		t.Errorf("preview %+v", p)
	}
	// A placeholder naming nothing, or a part inside a longer string.
	for _, bad := range []string{
		`{"tool":"send","arguments":{"a":"{{mandate:splice:3}}"},"splice":[1]}`,
		`{"tool":"send","arguments":{"a":"x{{mandate:part:0}}"},"splice_parts":[{"blob":2,"path":"$.iban"}]}`,
		`{"tool":"send","arguments":{"a.b":"{{mandate:part:0}}"},"splice_parts":[{"blob":2,"path":"$.iban"}]}`,
	} {
		call.Init(OpCall, []byte(bad), sc, kindapi.TaskInfo{}, nil, func(h abi.Handle) (*kindapi.Blob, error) { return blobs[h-1], nil }, nil)
		if _, err := k.Prepare(&call); kindapi.ErrnoOf(err) != abi.EINVAL {
			t.Errorf("%s: %v, want EINVAL", bad, err)
		}
	}
}

// TestResourcesAndPrompts: only the resources and prompts the grant
// passes through are listed, read and got; the rest are refused before
// anything is sent; their contents carry the results entries for
// "resource:" and "prompt:".
func TestResourcesAndPrompts(t *testing.T) {
	ts := newTestServer(t)
	url := ts.startHTTP(t)
	e := newKenv(t)
	kt := e.start(kgrant{name: "up", spec: specOf(t, httpBase(url), map[string]any{"tools": []string{"echo"},
		"resources": []string{"file:///data/*"}, "prompts": []string{"summarise"}, "clearance": []string{"files:alice"},
		"results": map[string]any{"resource:file:///data/*": map[string]any{"labels": []string{"files:alice"}}, "prompt:*": map[string]any{"taint": "prompts:t"}}})},
		kgrant{name: "none", spec: specOf(t, httpBase(url), map[string]any{"tools": []string{"echo"}})})
	b, _, err := kt.op("up", OpResources, map[string]any{})
	if err != nil || !strings.Contains(string(b), "file:///data/a.txt") || strings.Contains(string(b), "secret") {
		t.Errorf("resources: %s %v", b, err)
	}
	b, label, err := kt.op("up", OpRead, map[string]any{"uri": "file:///data/a.txt"})
	if err != nil || !strings.Contains(string(b), "the text of file:///data/a.txt") || !slices.Contains(label.Conf(), "files:alice") {
		t.Errorf("read: %s %v %v", b, label, err)
	}
	reads := count(ts.Methods(), "resources/read")
	if _, _, err := kt.op("up", OpRead, map[string]any{"uri": "file:///secret/b.txt"}); kindapi.ErrnoOf(err) != abi.EDENIED {
		t.Errorf("read of a resource not passed through: %v", err)
	}
	if count(ts.Methods(), "resources/read") != reads {
		t.Error("the refused read reached the server")
	}
	b, _, err = kt.op("up", OpPrompts, nil)
	if err != nil || !strings.Contains(string(b), "summarise") || strings.Contains(string(b), "other") {
		t.Errorf("prompts: %s %v", b, err)
	}
	b, label, err = kt.op("up", OpPrompt, map[string]any{"name": "summarise", "arguments": map[string]string{"topic": "cats"}})
	if err != nil || !strings.Contains(string(b), "summarise cats") || !slices.Contains(label.Integ(), "prompts:t") {
		t.Errorf("prompt: %s %v %v", b, label, err)
	}
	if _, _, err := kt.op("up", OpPrompt, map[string]any{"name": "other"}); kindapi.ErrnoOf(err) != abi.EDENIED {
		t.Errorf("a prompt not passed through: %v", err)
	}
	for _, op := range []string{OpResources, OpPrompts} {
		if _, _, err := kt.op("none", op, map[string]any{}); kindapi.ErrnoOf(err) != abi.EDENIED {
			t.Errorf("%s on a grant passing none through: %v", op, err)
		}
	}
}

// TestReconnect: after the server's process dies, the next call starts it
// again.
func TestReconnect(t *testing.T) {
	e := newKenv(t)
	base := stdioBase(t)
	kt := e.start(kgrant{name: "s", spec: specOf(t, base, e.pinned(base, "echo"))})
	kt.mustCall("s", "echo", map[string]any{"text": "one"})
	u := e.kind.known(kt.scope("s"))
	u.mu.Lock()
	p := u.proc
	u.mu.Unlock()
	p.kill()
	<-p.done
	// The session notices the death (its read ends); a call racing it
	// may fail once, cleanly. The next one connects again.
	for i := 0; ; i++ {
		_, _, err := kt.call("s", "echo", map[string]any{"text": "two"})
		if err == nil {
			break
		}
		if e := kindapi.ErrnoOf(err); e != abi.EIO || i > 2 {
			t.Fatalf("call after the server died: %v", err)
		}
	}
}
