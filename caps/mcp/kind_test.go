package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mandatevm/mandate/constraint"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// The tests of this package run a real upstream: an in-process Go SDK MCP
// server (testServer) served over Streamable HTTP by httptest, or over
// stdio by this test binary itself, re-executed with stdioEnv set
// (TestMain). Calls go through a real kernel (kenv): a task on
// kerneltest.WaitEngine makes them from Go (Task.Invoke), so each passes
// the whole pipeline.

// stdioEnv, set in a re-executed test binary, makes it serve testServer
// on its stdin and stdout instead of running tests.
const stdioEnv = "MANDATE_MCP_TEST_SERVE_STDIO"

func TestMain(m *testing.M) {
	if os.Getenv(stdioEnv) == "1" {
		err := newTestServer(nil).srv.Run(context.Background(), &sdk.StdioTransport{})
		if err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testSecret is a header value the tests inject: it must reach the
// server and nowhere else.
const testSecret = "s3cret-token-0123456789"

// testServer is the upstream. Its tools:
//
//   - echo {"text": s}: the text, and structuredContent {"text": s,
//     "owner": "alice"};
//   - write {"path": p, "content": c}: "wrote p" (a tool with effects, for
//     constraints);
//   - env: structuredContent {"env": the process's environment};
//   - fail: a tool's own failure (isError);
//   - mutable: its description is whatever SetMutable last set;
//   - mutate {"desc": d}: sets mutable's description to d;
//
// and the resources file:///data/a.txt and file:///secret/b.txt, and the
// prompts summarise and other.
type testServer struct {
	srv *sdk.Server
	mu  sync.Mutex
	// methods are the JSON-RPC methods the HTTP server received, in
	// order; auth every Authorization header it received.
	methods []string
	auth    []string
	calls   []string // the tools called (both transports, as the handler saw them)
}

var objectSchema = json.RawMessage(`{"type":"object"}`)

func newTestServer(t testing.TB) *testServer {
	ts := &testServer{srv: sdk.NewServer(&sdk.Implementation{Name: "test", Version: "1"}, nil)}
	text := func(s string) []sdk.Content { return []sdk.Content{&sdk.TextContent{Text: s}} }
	ts.srv.AddTool(&sdk.Tool{Name: "echo", Description: "Echoes its text.", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			ts.called("echo")
			var a struct{ Text string }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			return &sdk.CallToolResult{Content: text(a.Text), StructuredContent: map[string]any{"text": a.Text, "owner": "alice"}}, nil
		})
	ts.srv.AddTool(&sdk.Tool{Name: "write", Description: "Writes a file.", InputSchema: objectSchema},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			ts.called("write")
			var a struct{ Path, Content string }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			return &sdk.CallToolResult{Content: text("wrote " + a.Path)}, nil
		})
	ts.srv.AddTool(&sdk.Tool{Name: "env", Description: "Reports the environment.", InputSchema: objectSchema},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			ts.called("env")
			return &sdk.CallToolResult{Content: text("env"), StructuredContent: map[string]any{"env": os.Environ()}}, nil
		})
	ts.srv.AddTool(&sdk.Tool{Name: "fail", Description: "Fails as a tool.", InputSchema: objectSchema},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			ts.called("fail")
			return &sdk.CallToolResult{Content: text("it failed"), IsError: true}, nil
		})
	ts.srv.AddTool(&sdk.Tool{Name: "mutate", Description: "Changes mutable's description.", InputSchema: objectSchema},
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			var a struct{ Desc string }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			ts.SetMutable(a.Desc)
			return &sdk.CallToolResult{Content: text("changed")}, nil
		})
	ts.SetMutable("The first description.")
	for _, uri := range []string{"file:///data/a.txt", "file:///secret/b.txt"} {
		ts.srv.AddResource(&sdk.Resource{URI: uri, Name: uri},
			func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
				return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: req.Params.URI, Text: "the text of " + req.Params.URI}}}, nil
			})
	}
	for _, name := range []string{"summarise", "other"} {
		ts.srv.AddPrompt(&sdk.Prompt{Name: name, Arguments: []*sdk.PromptArgument{{Name: "topic"}}},
			func(_ context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
				return &sdk.GetPromptResult{Description: name, Messages: []*sdk.PromptMessage{
					{Role: "user", Content: &sdk.TextContent{Text: name + " " + req.Params.Arguments["topic"]}}}}, nil
			})
	}
	return ts
}

// SetMutable changes the mutable tool's definition.
func (ts *testServer) SetMutable(desc string) {
	ts.srv.AddTool(&sdk.Tool{Name: "mutable", Description: desc, InputSchema: objectSchema},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			ts.called("mutable")
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: desc}}}, nil
		})
}

func (ts *testServer) called(tool string) {
	ts.mu.Lock()
	ts.calls = append(ts.calls, tool)
	ts.mu.Unlock()
}

// Calls returns the tools called so far.
func (ts *testServer) Calls() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.calls)
}

// Methods returns the JSON-RPC methods received over HTTP so far.
func (ts *testServer) Methods() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.methods)
}

// Auth returns the Authorization headers received so far.
func (ts *testServer) Auth() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.auth)
}

// startHTTP serves ts over Streamable HTTP on loopback, recording every
// request's method and Authorization header; it returns the endpoint.
func (ts *testServer) startHTTP(t testing.TB) string {
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return ts.srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		ts.mu.Lock()
		if m.Method != "" {
			ts.methods = append(ts.methods, m.Method)
		}
		if a := r.Header.Get("Authorization"); a != "" {
			ts.auth = append(ts.auth, a)
		}
		ts.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		// A client's standing event stream is a request that never ends
		// on its own: close the connections, then the server.
		hs.CloseClientConnections()
		hs.Close()
	})
	return hs.URL + "/mcp"
}

// count is how many times v is in list.
func count(list []string, v string) int {
	n := 0
	for _, x := range list {
		if x == v {
			n++
		}
	}
	return n
}

// testEnv is the environment grants read (GrantContext.LookupEnv).
var testEnv = map[string]string{
	"MCP_TOKEN": testSecret,
	stdioEnv:    "1",
	"VISIBLE":   "shown-to-the-server",
	"PATH":      os.Getenv("PATH"),
}

var testGC = kindapi.GrantContext{LookupEnv: func(n string) (string, bool) { v, ok := testEnv[n]; return v, ok }}

// kenv is a kernel with one mcp kind, its logs in memory.
type kenv struct {
	t    testing.TB
	kind *Kind
	k    *kernel.Kernel
	logs *kerneltest.Buffer
}

func newKenv(t testing.TB) *kenv {
	t.Helper()
	e := &kenv{t: t, logs: &kerneltest.Buffer{}}
	logger := hclog.New(&hclog.LoggerOptions{Output: e.logs, Level: hclog.Trace})
	e.kind = New(WithLogger(logger))
	k, err := kernel.New(kernel.Config{Engine: kerneltest.WaitEngine{}, Kinds: []kindapi.Kind{e.kind},
		Logger: logger, Constraints: constraint.New()})
	if err != nil {
		t.Fatal(err)
	}
	e.k = k
	t.Cleanup(func() {
		if err := e.kind.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if strings.Contains(e.logs.String(), testSecret) {
			t.Errorf("the secret header is in the kernel's logs")
		}
	})
	return e
}

// kgrant is a root grant of a task.
type kgrant struct {
	name, spec string
	when       []string
	budget     string
}

// ktask is a task holding grants.
type ktask struct {
	e    *kenv
	task *kernel.Task
}

func (e *kenv) start(grants ...kgrant) *ktask {
	t := e.t
	t.Helper()
	var specs []kernel.GrantSpec
	for _, g := range grants {
		s, err := e.k.Grant(KindName, testGC, []byte(g.spec))
		if err != nil {
			t.Fatalf("grant %s: %v", g.name, err)
		}
		gs := kernel.GrantSpec{Name: g.name, Kind: KindName, Scope: s}
		if len(g.when) > 0 {
			if gs.Constraints, err = e.k.CompileConstraints(KindName, g.when, nil); err != nil {
				t.Fatalf("grant %s: when: %v", g.name, err)
			}
		}
		if g.budget != "" {
			if gs.Allowance.Budget, err = e.k.ParseBudget(KindName, s, g.budget); err != nil {
				t.Fatal(err)
			}
		}
		specs = append(specs, gs)
	}
	mod, _ := kerneltest.WaitEngine{}.Compile(context.Background(), nil)
	task, err := e.k.Start(context.Background(), kernel.TaskSpec{Module: mod, Principal: "alice", Grants: specs,
		Limits: kernel.Limits{MaxHandles: 4096, Timeout: 10 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		task.Kill()
		<-task.Done()
	})
	return &ktask{e: e, task: task}
}

func (kt *ktask) handle(name string) abi.Handle {
	kt.e.t.Helper()
	h, err := kt.task.Lookup(context.Background(), name)
	if err != nil {
		kt.e.t.Fatalf("lookup %s: %v", name, err)
	}
	return h
}

// invoke calls op on the capability name and returns the result blob's
// handle, unread.
func (kt *ktask) invoke(name, op string, args any) (abi.Handle, error) {
	b, ok := args.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(args); err != nil {
			kt.e.t.Fatal(err)
		}
	}
	return kt.task.Invoke(context.Background(), kt.handle(name), op, b)
}

// op calls op and reads the result (raising the task's label).
func (kt *ktask) op(name, op string, args any) ([]byte, kindapi.Label, error) {
	h, err := kt.invoke(name, op, args)
	if err != nil {
		return nil, kindapi.Label{}, err
	}
	return kt.read(h)
}

func (kt *ktask) read(h abi.Handle) ([]byte, kindapi.Label, error) {
	ctx := context.Background()
	label, err := kt.task.BlobLabel(h)
	if err != nil {
		return nil, kindapi.Label{}, err
	}
	n, err := kt.task.BlobLen(ctx, h)
	if err != nil {
		return nil, kindapi.Label{}, err
	}
	p := make([]byte, n)
	if _, err := kt.task.ReadBlob(ctx, h, 0, p); err != nil {
		return nil, kindapi.Label{}, err
	}
	return p, label, nil
}

// call calls tool with args through the capability name.
func (kt *ktask) call(name, tool string, args any) ([]byte, kindapi.Label, error) {
	return kt.op(name, OpCall, map[string]any{"tool": tool, "arguments": args})
}

func (kt *ktask) mustCall(name, tool string, args any) ([]byte, kindapi.Label) {
	kt.e.t.Helper()
	b, l, err := kt.call(name, tool, args)
	if err != nil {
		kt.e.t.Fatalf("call %s on %s: %v", tool, name, err)
	}
	return b, l
}

// refused checks that calling tool fails with errno want and returns
// the error.
func (kt *ktask) refused(name, tool string, args any, want abi.Errno) error {
	kt.e.t.Helper()
	_, _, err := kt.call(name, tool, args)
	if got := kindapi.ErrnoOf(err); got != want {
		kt.e.t.Fatalf("call %s on %s: %v (errno %s), want %s", tool, name, err, got, want)
	}
	return err
}

// specOf writes a grant spec: base fields and more.
func specOf(t testing.TB, fields ...map[string]any) string {
	m := map[string]any{}
	for _, f := range fields {
		for k, v := range f {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pinsFor asks the kind for the definitions of the tools base allows and
// returns their digests, as an operator pinning them does.
func (e *kenv) pinsFor(base map[string]any, tools ...string) map[string]any {
	e.t.Helper()
	s, err := e.kind.Grant(testGC, []byte(specOf(e.t, base, map[string]any{"tools": tools})))
	if err != nil {
		e.t.Fatal(err)
	}
	defs, err := e.kind.Definitions(context.Background(), s)
	if err != nil {
		e.t.Fatal(err)
	}
	pins := map[string]any{}
	for _, d := range defs {
		if d.Pinned() || d.Pin != "" {
			e.t.Fatalf("definition %s has a pin %q though the grant names none", d.Name, d.Pin)
		}
		pins[d.Name] = d.Digest
	}
	return pins
}

// pinned is the fields of a grant of tools, each pinned as the server
// defines it now.
func (e *kenv) pinned(base map[string]any, tools ...string) map[string]any {
	return map[string]any{"tools": tools, "pins": e.pinsFor(base, tools...)}
}

// httpBase is the base of a spec for the server at url.
func httpBase(url string) map[string]any { return map[string]any{"url": url, "allow_private": true} }

// stdioBase is the base of a spec that runs this binary as the server.
func stdioBase(t testing.TB) map[string]any {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{"command": []string{exe}, "env": []string{stdioEnv, "VISIBLE"}}
}

// TestInfo: the operations, the variables constraints see, amounts in
// calls.
func TestInfo(t *testing.T) {
	k := New()
	info := k.Info()
	if want := []string{OpCall, OpTools, OpResources, OpRead, OpPrompts, OpPrompt}; !slices.Equal(info.Ops, want) {
		t.Errorf("ops %v, want %v", info.Ops, want)
	}
	if !slices.Equal(info.Vars, []string{"tool", "args"}) {
		t.Errorf("vars %v", info.Vars)
	}
	if n, err := info.Amounts.ParseAmount(nil, "12 calls"); err != nil || n != 12 {
		t.Errorf("ParseAmount(12 calls) = %d, %v", n, err)
	}
	if _, err := info.Amounts.ParseAmount(nil, "-1"); err == nil {
		t.Error("a negative budget was accepted")
	}
	if got := info.Amounts.FormatAmount(nil, 3); got != "3 calls" {
		t.Errorf("FormatAmount(3) = %q", got)
	}
	if k.Name() != KindName || KindName != "mcp" {
		t.Errorf("name %q", k.Name())
	}
}

// TestDescribe: the upstream, tools, pins, where headers come from (never
// their values), the sink and the label bound; never repeatable.
func TestDescribe(t *testing.T) {
	k := New()
	s, err := k.Grant(testGC, []byte(`{"url":"https://mcp.example/mcp","tools":["echo","list_*"],
		"pins":{"echo":"sha256:`+strings.Repeat("a", 64)+`"},
		"headers":[{"name":"Authorization","env":"MCP_TOKEN","prefix":"Bearer "}],
		"clearance":["pii:alice"],"results":{"echo":{"labels":["pii:alice"],"taint":"t:echo"}},
		"costs":{"echo":5},"timeout":"10s"}`))
	if err != nil {
		t.Fatal(err)
	}
	d := k.Describe(s)
	fields := map[string]string{}
	for _, f := range d.Fields {
		fields[f.Name] += f.Value
	}
	for name, want := range map[string]string{
		"upstream": "https://mcp.example/mcp", "tools": "echo,list_*", "headers": "Authorization from env:MCP_TOKEN (set by the kernel)",
		"clearance": "pii:alice", "costs": "echo=5", "timeout": "10s",
	} {
		if fields[name] != want {
			t.Errorf("%s: %q, want %q", name, fields[name], want)
		}
	}
	if !strings.Contains(fields["pins"], "echo sha256:aaaa") || !strings.Contains(fields["results"], "echo: taint t:echo, labels pii:alice") {
		t.Errorf("pins %q, results %q", fields["pins"], fields["results"])
	}
	if d.Repeatable || d.NotRepeatable == "" {
		t.Errorf("repeatable %v (%q): an upstream tool may change things", d.Repeatable, d.NotRepeatable)
	}
	if d.Sink == nil || !slices.Equal(d.Sink.Clearance.Conf(), []string{"pii:alice"}) {
		t.Errorf("sink %+v", d.Sink)
	}
	if !slices.Contains(d.Label.Integ(), "mcp:https://mcp.example/mcp") || !slices.Contains(d.Label.Integ(), "t:echo") || !slices.Contains(d.Label.Conf(), "pii:alice") {
		t.Errorf("label bound %v", d.Label)
	}
	b, err := json.Marshal(struct {
		Fields  []kindapi.Detail
		Reaches []string
		Label   kindapi.Label
	}{d.Fields, d.Reaches, d.Label})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), testSecret) {
		t.Errorf("the description holds the secret: %s", b)
	}
}

// TestCloseEndsProcess: Close ends a stdio server's process, and calls
// after it are refused cleanly.
func TestCloseEndsProcess(t *testing.T) {
	e := newKenv(t)
	base := stdioBase(t)
	kt := e.start(kgrant{name: "s", spec: specOf(t, base, e.pinned(base, "echo"))})
	kt.mustCall("s", "echo", map[string]any{"text": "hi"})
	u := e.kind.known(kt.scope("s"))
	u.mu.Lock()
	p := u.proc
	u.mu.Unlock()
	if p == nil {
		t.Fatal("no process after a stdio call")
	}
	if err := e.kind.Close(); err != nil {
		t.Fatal(err)
	}
	<-p.done // the process ended (no fixed wait: the test times out otherwise)
	if _, _, err := kt.call("s", "echo", map[string]any{"text": "again"}); kindapi.ErrnoOf(err) != abi.EIO {
		t.Errorf("a call after Close: %v, want EIO", err)
	}
}

// scope returns the scope of the task's root capability name.
func (kt *ktask) scope(name string) *Scope {
	kt.e.t.Helper()
	c, ok := kt.task.CapByName(name)
	if !ok {
		kt.e.t.Fatalf("no capability %s", name)
	}
	return c.Scope().(*Scope)
}
