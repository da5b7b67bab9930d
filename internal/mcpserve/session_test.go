package mcpserve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mandatevm/mandate/caps/data"
	"github.com/mandatevm/mandate/caps/declassify"
	"github.com/mandatevm/mandate/caps/net"
	"github.com/mandatevm/mandate/constraint"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/runstore"
	"github.com/mandatevm/mandate/sandbox"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// These tests drive a Session with the Go SDK's own client, in process:
// tools are the real guest testdata/guests/mcp-tool on the engine under
// test, the web and the mail API are loopback recorders.

type fixture struct {
	t    *testing.T
	k    *kernel.Kernel
	s    *Session
	cs   *mcp.ClientSession
	web  *kerneltest.Recorder
	mail *kerneltest.Recorder
	aud  *recAuditor
}

// recAuditor keeps the kernel's audit events.
type recAuditor struct {
	mu  sync.Mutex
	evs []kernel.AuditEvent
}

func (a *recAuditor) Record(_ context.Context, ev kernel.AuditEvent) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.evs = append(a.evs, ev)
	return nil
}

// has reports whether an entry of op has a reason containing text.
func (a *recAuditor) has(op, text string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ev := range a.evs {
		if ev.Op == op && strings.Contains(ev.Reason, text) {
			return true
		}
	}
	return false
}

// effects are the effects of task's calls, from its outcome entries, as
// host.Run.Effects gives them.
func (a *recAuditor) effects(task string) []runstore.Effect {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []runstore.Effect
	for _, ev := range a.evs {
		if ev.Task == task && ev.Effect != nil {
			out = append(out, runstore.Effect{Time: ev.Time, Task: ev.Task, Cap: ev.Cap, Kind: ev.Kind, Op: ev.Op,
				Summary: ev.Effect.Summary, Outcome: ev.Effect.Outcome})
		}
	}
	return out
}

// denials are the audited denials of task, as "op errno".
func (a *recAuditor) denials(task string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, ev := range a.evs {
		if ev.Task == task && ev.Decision == kernel.Deny {
			out = append(out, ev.Op+" "+ev.Errno.String())
		}
	}
	return out
}

const records = `[{"id":"alice","owner":"alice","fields":{"plan":"Gold PPO","passport":"X1234567"},"labels":{"passport":["pii:$owner"],"plan":["pii:$owner"]}}]`

func newFixture(t *testing.T) *fixture { return newFixtureWith(t, fixtureOpts{}) }

// fixtureOpts vary a fixture: the session's approvals (the kernel's
// approver; default: none, every question refused), what the mail
// capability's spec adds, and the client's options.
type fixtureOpts struct {
	approvals   *Approvals
	mailApprove string // an approve_when on the mail capability
	client      *mcp.ClientOptions
	// clientApproval: send_email's approvals are the client's form
	// (approval = "client").
	clientApproval bool
	// labels is the client's label, shared by its sessions.
	labels ClientLabel
	// mailResponses: what send_email's results carry (the policy's
	// responses).
	mailResponses *kindapi.Label
	// effects: tool results carry their calls' effects, from the
	// auditor's outcome entries (Config.Effects).
	effects bool
}

// indirect is an Approver set once the session exists.
func newFixtureWith(t *testing.T, o fixtureOpts) *fixture {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs a guest")
	}
	f := &fixture{t: t}
	f.web = kerneltest.NewRecorder(func(w http.ResponseWriter, r *http.Request, _ kerneltest.Request) { fmt.Fprint(w, "search results") })
	t.Cleanup(f.web.Close)
	f.mail = kerneltest.NewRecorder(func(w http.ResponseWriter, r *http.Request, _ kerneltest.Request) { fmt.Fprint(w, "queued") })
	t.Cleanup(f.mail.Close)
	ctx := context.Background()
	store, err := data.Open(filepath.Join(t.TempDir(), "data.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	recs, err := data.ParseJSON(strings.NewReader(records))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Import(ctx, "benefits", recs, data.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	eng := testengine.New(t)
	var appr kernel.Approver = kernel.DenyAll
	if o.approvals != nil {
		appr = o.approvals
	}
	f.aud = &recAuditor{}
	k, err := kernel.New(kernel.Config{Engine: eng, Kinds: []kindapi.Kind{net.New(), data.New(store), declassify.New()}, Approver: appr,
		Declassifiers: []string{declassify.KindName}, Auditor: f.aud,
		Constraints: constraint.New()})
	if err != nil {
		t.Fatal(err)
	}
	f.k = k
	wasm := guestbuild.MustBuild("../../testdata/guests/mcp-tool", false)
	mod, err := eng.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mod.Close(context.Background()) })
	grant := func(name, kind, spec string) kernel.GrantSpec {
		s, err := k.Grant(kind, kindapi.GrantContext{}, []byte(spec))
		if err != nil {
			t.Fatalf("grant %s: %v", name, err)
		}
		return kernel.GrantSpec{Name: name, Kind: kind, Scope: s}
	}
	schema := json.RawMessage(`{"type":"object","properties":{"op":{"type":"string"},"text":{"type":"string"},"json":{"type":"boolean"},
		"owner":{"type":"string"},"path":{"type":"string"},"body":{}},"required":["op"]}`)
	lim := kernel.Limits{Timeout: 30 * time.Second, Memory: 64 << 20}
	tools := []*Tool{
		{Name: "echo", Description: "Echo.", InputSchema: schema, Module: mod, Limits: lim},
		{Name: "my_benefits", Description: "Your own benefits record.", InputSchema: schema, Module: mod, Limits: lim, Caps: []string{"records"}},
		{Name: "benefits_ref", Description: "Your own benefits record, by reference.", InputSchema: schema, Module: mod, Limits: lim,
			Caps: []string{"records"}, ByReference: true},
		{Name: "my_plan", Description: "Your plan's name, declassified.", InputSchema: schema, Module: mod, Limits: lim,
			Caps: []string{"records", "declass"}},
		{Name: "web_search", Description: "Search the web.", InputSchema: schema, Module: mod, Limits: lim, Caps: []string{"web"}},
		{Name: "send_email", Description: "Mail yourself.", InputSchema: schema, Module: mod, Limits: lim, Caps: []string{"mail"}, ClientApproval: o.clientApproval, Responses: o.mailResponses},
	}
	recordsSpec := `{"collection":"benefits","records":"own","fields":["plan","passport"]}`
	grants := []kernel.GrantSpec{
		grant(SessionCapName("my_benefits", "records"), "data", recordsSpec),
		grant(SessionCapName("benefits_ref", "records"), "data", recordsSpec),
		grant(SessionCapName("my_plan", "records"), "data", recordsSpec),
		grant(SessionCapName("my_plan", "declass"), "declassify", `{"drop":["pii:alice"],"project":["fields.plan"]}`),
		grant(SessionCapName("web_search", "web"), "net", `{"origin":"`+f.web.URL+`","allow_private":true,"methods":["GET"],"paths":["/search"]}`),
		grant(SessionCapName("send_email", "mail"), "net", `{"origin":"`+f.mail.URL+`","allow_private":true,"methods":["POST"],"paths":["/send"],"clearance":["pii:alice"]}`),
	}
	if o.mailApprove != "" {
		cons, err := k.CompileConstraints("net", nil, []string{o.mailApprove})
		if err != nil {
			t.Fatal(err)
		}
		grants[len(grants)-1].Constraints = cons
	}
	clear := kindapi.NewLabel([]string{"pii:alice"}, nil)
	session, err := k.Start(ctx, kernel.TaskSpec{Module: sandbox.IdleModule{}, Principal: "alice", Name: "session",
		Clearance: &clear, Grants: grants, Limits: kernel.Limits{Timeout: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { session.Kill(); <-session.Done() })
	cfg := Config{Kernel: k, Task: session, Tools: tools, Approvals: o.approvals, Labels: o.labels}
	if o.effects {
		cfg.Effects = f.aud.effects
	}
	f.s, err = NewSession(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	if _, err := f.s.Server().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	f.cs, err = mcp.NewClient(&mcp.Implementation{Name: "test-client"}, o.client).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.cs.Close() })
	return f
}

func (f *fixture) call(name string, args map[string]any) *mcp.CallToolResult {
	f.t.Helper()
	res, err := f.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		f.t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func (f *fixture) description(name string) string {
	f.t.Helper()
	res, err := f.cs.ListTools(context.Background(), nil)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, tl := range res.Tools {
		if tl.Name == name {
			return tl.Description
		}
	}
	f.t.Fatalf("no tool %s listed", name)
	return ""
}

// TestSessionLabelFloats: the session of the story. web_search
// works; my_benefits works, and the session has now seen Alice's record;
// then web_search is refused (EFLOW) before its task starts, and listed as
// unavailable, while send_email, cleared for her data, still works.
func TestSessionLabelFloats(t *testing.T) {
	f := newFixture(t)
	r := f.call("web_search", map[string]any{"op": "fetch", "path": "/search?q=dentists"})
	if r.IsError || text(r) != "search results" {
		t.Fatalf("web_search: %s", text(r))
	}
	// The result says what influenced it.
	if l, ok := r.Meta[LabelMeta].(map[string]any); !ok || !strings.HasPrefix(fmt.Sprint(l["integ"]), "[web:http://127.0.0.1:") {
		t.Errorf("the search result's _meta: %v", r.Meta)
	}
	r = f.call("my_benefits", map[string]any{"op": "read", "owner": "alice"})
	if r.IsError || !strings.Contains(text(r), "Gold PPO") {
		t.Fatalf("my_benefits: %s", text(r))
	}
	if l := f.s.Task().Label(); len(l.Conf()) != 1 {
		t.Fatalf("the session's label after reading the record: %v", l)
	}
	searches := len(f.web.Requests())
	tasks := len(f.k.Tasks())
	r = f.call("web_search", map[string]any{"op": "fetch", "path": "/search?q=Gold+PPO"})
	if !r.IsError || !strings.HasPrefix(text(r), "EFLOW") {
		t.Fatalf("web_search after the record: %v %s", r.IsError, text(r))
	}
	if len(f.web.Requests()) != searches || len(f.k.Tasks()) != tasks {
		t.Error("the refused call reached the web or started a task")
	}
	// The refusal is a denial of the session's run: audited and counted.
	if d := f.aud.denials(f.s.Task().ID()); !slices.Equal(d, []string{"tool:web_search EFLOW"}) || f.s.Task().Denials() != 1 {
		t.Errorf("the session's audited denials: %v (counted %d), want the EFLOW refusal", d, f.s.Task().Denials())
	}
	if d := f.description("web_search"); !strings.Contains(d, "unavailable in this session: EFLOW") {
		t.Errorf("tools/list does not mark web_search unavailable: %q", d)
	}
	if r := f.call("send_email", map[string]any{"op": "post", "path": "/send", "body": "my plan is Gold PPO"}); r.IsError || text(r) != "sent: 200" {
		t.Errorf("send_email: %s", text(r))
	}
}

// TestByReference: a result by reference leaves the session's label where
// it was; passed to another tool, it reaches the mail API spliced, unread
// by any task; a reference the session did not make is refused.
func TestByReference(t *testing.T) {
	f := newFixture(t)
	r := f.call("benefits_ref", map[string]any{"op": "read", "owner": "alice"})
	ref := text(r)
	if r.IsError || !strings.HasPrefix(ref, RefScheme) || strings.Contains(ref, "Gold PPO") {
		t.Fatalf("benefits_ref: %s", ref)
	}
	if l := f.s.Task().Label(); !l.IsZero() {
		t.Fatalf("a result by reference raised the session to %v", l)
	}
	if r := f.call("web_search", map[string]any{"op": "fetch", "path": "/search?q=x"}); r.IsError {
		t.Errorf("the web while holding a reference: %s", text(r))
	}
	id := strings.Fields(ref)[0]
	if r := f.call("send_email", map[string]any{"op": "post", "path": "/send", "body": id}); r.IsError {
		t.Fatalf("send_email with the reference: %s", text(r))
	}
	reqs := f.mail.Requests()
	if len(reqs) != 1 || !strings.Contains(string(reqs[0].Body), "X1234567") {
		t.Fatalf("the mail API got %v", reqs)
	}
	// The mail API's answer may echo what was spliced into the request:
	// returned by value, it carries the record's label to the session.
	if l := f.s.Task().Label(); len(l.Conf()) != 1 {
		t.Errorf("the session's label after the mail API's answer: %v", l)
	}
	other := RefScheme + strings.Repeat("ab", 16)
	if r := f.call("send_email", map[string]any{"op": "post", "path": "/send", "body": other}); !r.IsError || !strings.Contains(text(r), "EBADHANDLE") {
		t.Errorf("a foreign reference: %s", text(r))
	}
}

// TestToolResponses: with responses saying what the mail API answers
// (nothing confidential, its own taint), sending Alice's record by
// reference leaves the session's confidentiality where it was: the
// answer is shown labelled {}/{mail:status} beside the result's own
// taints, and web_search still works.
func TestToolResponses(t *testing.T) {
	declared := kindapi.NewLabel(nil, []string{"mail:status"})
	f := newFixtureWith(t, fixtureOpts{mailResponses: &declared})
	ref := strings.Fields(text(f.call("benefits_ref", map[string]any{"op": "read", "owner": "alice"})))[0]
	r := f.call("send_email", map[string]any{"op": "post", "path": "/send", "body": ref})
	if r.IsError {
		t.Fatalf("send_email with the reference: %s", text(r))
	}
	if reqs := f.mail.Requests(); len(reqs) != 1 || !strings.Contains(string(reqs[0].Body), "X1234567") {
		t.Fatalf("the mail API got %v", reqs)
	}
	l := f.s.Task().Label()
	if len(l.Conf()) != 0 || !slices.Contains(l.Integ(), "mail:status") {
		t.Errorf("the session's label after the mail API's declared answer: %v", l)
	}
	if m, ok := r.Meta[LabelMeta].(map[string]any); !ok || fmt.Sprint(m["conf"]) != "[]" {
		t.Errorf("the answer's _meta label: %v", r.Meta)
	}
	if r := f.call("web_search", map[string]any{"op": "fetch", "path": "/search?q=x"}); r.IsError {
		t.Errorf("web_search after the declared answer: %s", text(r))
	}
}

// TestCallsAreChecked: arguments that break the schema start no task; a
// kernel refusal inside a tool is a tool error naming the errno and the
// reason; results come back as text and structured content.
func TestCallsAreChecked(t *testing.T) {
	f := newFixture(t)
	tasks := len(f.k.Tasks())
	for _, args := range []map[string]any{{"text": "no op"}, {"op": 7}} {
		if r := f.call("echo", args); !r.IsError || !strings.Contains(text(r), "EINVAL") {
			t.Errorf("echo %v: %s", args, text(r))
		}
	}
	if len(f.k.Tasks()) != tasks {
		t.Error("an invalid call started a task")
	}
	r := f.call("echo", map[string]any{"op": "echo", "text": "hi", "json": true})
	if r.IsError || text(r) != `{"echo":"hi"}` {
		t.Fatalf("echo: %s", text(r))
	}
	if m, ok := r.StructuredContent.(map[string]any); !ok || m["echo"] != "hi" {
		t.Errorf("structured content %v", r.StructuredContent)
	}
	r = f.call("web_search", map[string]any{"op": "fetch", "path": "/admin"})
	if !r.IsError || !strings.HasPrefix(text(r), "EDENIED") || !strings.Contains(text(r), "/admin") {
		t.Errorf("a denied fetch: %s", text(r))
	}
	if _, err := f.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "no\x1b[2Jsuch", Arguments: map[string]any{}}); err == nil {
		t.Error("an unknown tool was called")
	}
}

// TestCancelKillsTheTask: a canceled call's task is killed.
func TestCancelKillsTheTask(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := f.cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"op": "spin"}})
	if err == nil {
		t.Fatal("a spinning call returned")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		running := 0
		for _, tk := range f.k.Tasks() {
			if tk != f.s.Task() && tk.State() == kernel.TaskRunning {
				running++
			}
		}
		if running == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d tool tasks still run after the call was canceled", running)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDeclassifyInASession: a tool that declassifies what it returns (a
// declassify capability, as in a task) leaves the session below the
// record's label: the model was shown only the plan's name, and the web
// stays open.
func TestDeclassifyInASession(t *testing.T) {
	f := newFixture(t)
	r := f.call("my_plan", map[string]any{"op": "plan", "owner": "alice"})
	if r.IsError || !strings.Contains(text(r), "Gold PPO") || strings.Contains(text(r), "X1234567") {
		t.Fatalf("my_plan: %s", text(r))
	}
	if l := f.s.Task().Label(); len(l.Conf()) != 0 || !strings.Contains(strings.Join(l.Integ(), ","), "declassified") {
		t.Fatalf("the session after a declassified result: %v, want no confidentiality and the declassified taint", l)
	}
	if r := f.call("web_search", map[string]any{"op": "fetch", "path": "/search?q=Gold+PPO"}); r.IsError {
		t.Errorf("web_search after the declassified result: %s", text(r))
	}
	// Without the declassify step the same record closes the web.
	f.call("my_benefits", map[string]any{"op": "read", "owner": "alice"})
	if r := f.call("web_search", map[string]any{"op": "fetch", "path": "/search?q=x"}); !r.IsError {
		t.Error("web_search after the raw record worked")
	}
}

// TestCanceledAfterTheTask: a call the client canceled after its task had
// finished shows nothing, so the record it read does not raise the
// session's label.
func TestCanceledAfterTheTask(t *testing.T) {
	f := newFixture(t)
	tool := f.s.tools["my_benefits"]
	c, _ := f.s.task.CapByName(SessionCapName("my_benefits", "records"))
	task, err := f.s.task.StartChild(context.Background(), kernel.ChildSpec{Module: tool.Module, Name: tool.Name, Limits: tool.Limits,
		Input: []byte(`{"op":"read","owner":"alice"}`), Caps: []kernel.PassedCap{{Name: "records", Cap: c}}})
	if err != nil {
		t.Fatal(err)
	}
	<-task.Done()
	if b := task.ResultBlob(); b == nil || len(b.Label().Conf()) == 0 {
		t.Fatalf("the task read no labelled record: %v", b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := f.s.await(ctx, tool, &running{task: task, asks: make(chan approvalAsk)})
	if !r.IsError || !strings.HasPrefix(text(r), "ECANCELED") || strings.Contains(text(r), "Gold PPO") {
		t.Errorf("a canceled call's answer: %s", text(r))
	}
	if l := f.s.Task().Label(); !l.IsZero() {
		t.Errorf("the session's label after a canceled call: %v", l)
	}
}

// TestToolResultCarriesEffects: a tool call that sent a POST carries, in
// its result's _meta, what it did (from the audit log's outcome entry)
// and how it came out; one that only read carries none.
func TestToolResultCarriesEffects(t *testing.T) {
	f := newFixtureWith(t, fixtureOpts{effects: true})
	r := f.call("send_email", map[string]any{"op": "post", "path": "/send", "body": "see you at 5"})
	if r.IsError {
		t.Fatalf("send_email: %s", text(r))
	}
	b, _ := json.Marshal(r.Meta[EffectsMeta])
	want := `[{"kind":"net","op":"call:fetch","outcome":"200","summary":"POST ` + f.mail.URL + `/send see you at 5"}]` // as the client decodes it
	if string(b) != want {
		t.Errorf("send_email's _meta[%q]: %s, want %s", EffectsMeta, b, want)
	}
	r = f.call("web_search", map[string]any{"op": "fetch", "path": "/search?q=dentists"})
	if _, ok := r.Meta[EffectsMeta]; ok || r.IsError {
		t.Errorf("a GET's result carries effects: %v", r.Meta)
	}
}

// TestToolsListCarriesTheLabel: tools/list's _meta carries the session's
// label (LabelMeta), and a tool unavailable at it carries why
// (UnavailableMeta), as its description says: what "mandate mcp client"
// shows as the session.
func TestToolsListCarriesTheLabel(t *testing.T) {
	f := newFixture(t)
	list := func() *mcp.ListToolsResult {
		t.Helper()
		res, err := f.cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if l, ok := list().Meta[LabelMeta].(map[string]any); !ok || fmt.Sprint(l["conf"], l["integ"]) != "[] []" {
		t.Errorf("tools/list's _meta before any call: %v, want the empty label", list().Meta)
	}
	if r := f.call("my_benefits", map[string]any{"op": "read", "owner": "alice"}); r.IsError {
		t.Fatalf("my_benefits: %s", text(r))
	}
	res := list()
	if l, ok := res.Meta[LabelMeta].(map[string]any); !ok || fmt.Sprint(l["conf"]) != "[pii:alice]" {
		t.Errorf("tools/list's _meta after the record: %v, want the session's label, pii:alice", res.Meta)
	}
	for _, tl := range res.Tools {
		why, marked := tl.Meta[UnavailableMeta].(string)
		switch {
		case tl.Name == "web_search" && (!marked || !strings.HasPrefix(why, "EFLOW: ") || !strings.Contains(tl.Description, why)):
			t.Errorf("web_search: _meta %v, description %q: want why it is unavailable in both", tl.Meta, tl.Description)
		case tl.Name != "web_search" && marked:
			t.Errorf("%s is marked unavailable: %v", tl.Name, tl.Meta)
		}
	}
}
