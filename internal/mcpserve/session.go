// Package mcpserve serves tools over the Model Context Protocol (the
// official Go SDK, github.com/modelcontextprotocol/go-sdk) as Mandate
// tasks: "mandate mcp serve POLICY.hcl".
//
// A client's connection is a Session, and the session is a kernel task
// with a floating label: it holds every tool's capabilities (as
// TOOL.CAP) and runs nothing; its label rises by the label of every result
// returned to the client, since the client's model has now seen it. Each
// tools/call is a fresh task, a child of the session task
// (kernel.Task.StartChild), holding exactly its tool's capabilities (passed from
// the session's, so uses and budgets hold across calls), with the
// arguments, validated against the tool's schema first, as its input. Its
// result is the tool's content: text, and JSON as structured content too.
//
// The rules the client cannot change:
//
//   - A call whose arguments do not validate never starts a task.
//   - A tool whose sinks cannot receive the session's label is refused
//     (EFLOW) before its task starts, and tools/list says so in its
//     description: once the model has read Alice's record, the tool that
//     posts to the web is unavailable for the rest of the session.
//   - The label is the client's, not the connection's (Config.Labels):
//     the model does not forget what it read when a connection ends, so
//     a new session of the client starts where the last one left off,
//     and a result shown in one session raises the label of all of the
//     client's sessions (each takes it up before a call or tools/list).
//   - A result above what the session may be shown (its clearance) is
//     withheld.
//   - A tool may return its result by reference (mandate://blob/ID): the
//     model sees the reference, passes it to another tool's argument, and
//     the kernel puts the blob in that tool's table unread; the session's
//     label does not rise. A reference belongs to the session that made
//     it.
//   - A kernel refusal is a tool error (isError) naming the errno and the
//     kernel's reason, for the model to adapt.
//   - Nothing a client sends grants, widens or re-scopes anything; tool
//     descriptions come from the policy, never from a guest.
//
// A canceled call (notifications/cancelled) kills its task; a call that
// runs long sends progress when the client asked for it. A use that needs
// a person's yes waits for the person, out of band (Approvals): the client
// is shown where the person answers, and its own answer approves nothing.
// A refusal by the session (a tool unavailable at its label, bad
// arguments, a foreign reference) is a denial of the session task:
// audited and counted like a task's.
//
// A tool may be a tool of an upstream MCP server (Tool.Upstream, a
// policy's upstream = NAME): its call is a task that makes one call on
// the tool's mcp capability (host.UpstreamModule), so everything above
// holds for it, and its result is the upstream's as it came (content,
// structured content, isError), labelled. The resources and prompts an
// upstream tool's capability passes through are offered too (upstream.go).
//
// What it does not do: it offers no resources or prompts of its own and
// no completions, a module's result is one text item (and structured
// content when it is a JSON object), tools cannot ask the client for sampling, and the
// sessionless protocol (2026-07-28 without a session) is not served: a
// session is what carries the label. CONFORMANCE.md has the conformance
// suite's verdicts, scenario by scenario.
package mcpserve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/runstore"
	"github.com/mandatevm/mandate/sandbox"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// RefScheme begins a result returned by reference.
const RefScheme = "mandate://blob/"

// MaxArgBytes bounds a call's arguments.
const MaxArgBytes = abi.MaxBlobLen / 4

// Tool is one tool as a session runs it.
type Tool struct {
	Name        string
	Description string          // from the policy
	InputSchema json.RawMessage // a JSON Schema of type object
	ByReference bool            // results go back as mandate://blob/ID
	Module      sandbox.Module  // compiled and pinned at start
	Entry       string
	Limits      kernel.Limits
	// Caps are the tool's capability names; the session task holds each
	// as Name+"."+cap.
	Caps []string
	// ClientApproval lets the client's form answer the tool's approvals
	// (the policy's approval = "client"): the client's yes, which a
	// model-driven client can give itself. Never for a pay capability.
	ClientApproval bool
	// Responses, when set, is what the tool's results carry when shown:
	// its confidentiality tags replace the result's (which are what was
	// sent to the tool's sinks: the policy allows it only on tools with
	// no confidential source of their own, manifest.ToolResponses), and
	// its integrity taints join the result's, which are kept.
	Responses *kindapi.Label
	// Upstream is the upstream tool's name when the tool is a tool of an
	// upstream MCP server (host.SessionTool.Upstream): Module makes one
	// call on its mcp capability and the task's result is the upstream's
	// CallToolResult, which the client is shown as it came (content,
	// structured content, isError), labelled.
	Upstream string
	// Unavailable, when set, is why the tool cannot be called in this
	// session at any label (host.SessionTool.Unavailable).
	Unavailable string
}

// SessionCapName is the name under which the session task holds a tool's
// capability: host.SessionCapName.
func SessionCapName(tool, cap string) string { return host.SessionCapName(tool, cap) }

// Session is one client connection.
type Session struct {
	k      *kernel.Kernel
	task   *kernel.Task
	called func()
	tools  map[string]*Tool
	order  []string
	logger hclog.Logger
	server *mcp.Server

	schemas map[string]*jsonschema.Resolved

	ap *Approvals
	// effects lists a call's effects for its result (Config.Effects).
	effects func(task string) []runstore.Effect

	labels ClientLabel // nil: the session's label is its own

	mu    sync.Mutex
	refs  map[string]*kindapi.Blob // protected by mu
	calls int                      // protected by mu

	// upstream are the upstream tools' capabilities that pass resources
	// or prompts through (upstream.go), listed once the client asks.
	upstream        []upstreamCap
	upMu            sync.Mutex
	resourcesListed bool // protected by upMu
	promptsListed   bool // protected by upMu
}

// Approvals are the questions of one session's calls for the person:
// the session's kernel.Approver. It is made before the session's kernel
// (host.SessionSpec.Approver) and given to the session
// (Config.Approvals), which registers each call's task with it before the
// task runs.
//
// A question goes to the person out of band (the pending approvals a
// person answers on mandate ui's page or with mandate approvals), never to
// the client: the client is the model's program, and its yes may be the
// model's own. While the person is asked, the call hands the client a
// URL-mode elicitation (the approval page's address, Asked) so that it
// can show the person where to answer; whatever the client answers
// approves nothing, and its decline refuses (Decline). Only a tool whose
// policy says approval = "client" is asked by the client's form
// (form-mode elicitation), and never for a payment.
type Approvals struct {
	person kernel.Approver
	// URL is the approval page of a pending approval, when there is one
	// (a mandate ui is running); Decline answers a pending approval no
	// on behalf of the client that declined it. Both may be nil.
	URL     func(id string) (string, bool)
	Decline func(ctx context.Context, id, by string) error

	mu   sync.Mutex
	peer *mcp.ServerSession // the client, as its last call came; protected by mu
	// Calls waiting for an answer (multi round-trip requests: the call
	// returns its input request, the client retries with the answer): by
	// the tool task asking, and by the request state handed to the
	// client.
	byTask  map[string]*running // protected by mu
	byState map[string]*asked   // protected by mu
}

var _ kernel.Approver = (*Approvals)(nil)

// NewApprovals returns the approvals of a session whose questions go to
// person (an out-of-band approver, or a fixed answer).
func NewApprovals(person kernel.Approver) *Approvals {
	if person == nil {
		person = kernel.DenyAll
	}
	return &Approvals{person: person, byTask: map[string]*running{}, byState: map[string]*asked{}}
}

// running is a call whose task runs.
type running struct {
	task   *kernel.Task
	client bool             // its tool's approvals are the client's (approval = "client")
	asks   chan approvalAsk // from the approver, to the call
}

// approvalAsk is one question handed to the client.
type approvalAsk struct {
	params *mcp.ElicitParams
	// answer takes the client's answer to a form; nil for a URL-mode
	// elicitation, whose answer approves nothing.
	answer chan bool
	// id is the pending approval a URL-mode elicitation points to.
	id string
}

// asked is a question handed to the client, waiting for its retry.
type asked struct {
	call *running
	ask  approvalAsk
}

// Config makes a Session.
type Config struct {
	Kernel *kernel.Kernel
	// Task is the session task: it holds SessionCapName(tool, cap) for
	// every cap of every tool, and runs nothing until the session ends.
	Task    *kernel.Task
	Tools   []*Tool
	Logger  hclog.Logger
	Name    string // the server's name in initialize
	Version string
	// Initialized, when set, is called once the client's session is
	// initialized, with the SDK's session (to wait for its end).
	Initialized func(*mcp.ServerSession)
	// Called, when set, is called after each call's task ended.
	Called func()
	// Approvals asks the person through the client; it must be the
	// session kernel's Approver for the questions to reach the client.
	// Default: a new one, not the kernel's, whose questions are never
	// asked.
	Approvals *Approvals
	// Labels, when set, is the label of the session's client, kept across
	// its sessions (the session task should start at it:
	// host.SessionSpec.Label): the session takes it up at every call and
	// tools/list (Sync), and every result it shows raises it before the
	// client is shown the result.
	Labels ClientLabel
	// SessionID, when set, is the session's Mcp-Session-Id over HTTP.
	SessionID string
	// Effects, when set, returns what the calls of a tool call's task
	// (and its children) did outside the kernel, from the audit log
	// (host.Run.Effects): each tool result carries them in its _meta
	// (EffectsMeta), beside the result.
	Effects func(task string) []runstore.Effect
}

// ClientLabel is the label of a session's client: what the client's
// model has been shown, by any of its sessions. It only rises.
type ClientLabel interface {
	// Label is the client's label now.
	Label(ctx context.Context) (kindapi.Label, error)
	// Raise records that the client is shown l, a result of tool: the
	// client's label becomes its join with l. An error withholds the
	// result.
	Raise(ctx context.Context, tool string, l kindapi.Label) error
}

// NewSession makes the MCP server of one client connection.
func NewSession(cfg Config) (*Session, error) {
	if cfg.Kernel == nil || cfg.Task == nil {
		return nil, errors.New("mcpserve: no kernel or session task")
	}
	s := &Session{k: cfg.Kernel, task: cfg.Task, called: cfg.Called, tools: map[string]*Tool{}, logger: cfg.Logger,
		schemas: map[string]*jsonschema.Resolved{}, refs: map[string]*kindapi.Blob{}, ap: cfg.Approvals, labels: cfg.Labels, effects: cfg.Effects}
	if s.ap == nil {
		s.ap = NewApprovals(kernel.DenyAll)
	}
	if s.logger == nil {
		s.logger = hclog.NewNullLogger()
	}
	for _, t := range cfg.Tools {
		if _, dup := s.tools[t.Name]; dup {
			return nil, fmt.Errorf("mcpserve: tool %q twice", t.Name)
		}
		var sch jsonschema.Schema
		if err := json.Unmarshal(t.InputSchema, &sch); err != nil {
			return nil, fmt.Errorf("mcpserve: tool %s: input schema: %v", t.Name, err)
		}
		r, err := sch.Resolve(nil)
		if err != nil {
			return nil, fmt.Errorf("mcpserve: tool %s: input schema: %v", t.Name, err)
		}
		for _, c := range t.Caps {
			if _, ok := cfg.Task.CapByName(SessionCapName(t.Name, c)); !ok {
				return nil, fmt.Errorf("mcpserve: the session task does not hold %s", SessionCapName(t.Name, c))
			}
		}
		s.schemas[t.Name] = r
		s.tools[t.Name] = t
		s.order = append(s.order, t.Name)
	}
	name := cfg.Name
	if name == "" {
		name = "mandate"
	}
	opts := &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}}
	s.upstream = upstreamCaps(cfg.Task, cfg.Tools)
	for _, u := range s.upstream {
		if u.resources {
			opts.Capabilities.Resources = &mcp.ResourceCapabilities{}
		}
		if u.prompts {
			opts.Capabilities.Prompts = &mcp.PromptCapabilities{}
		}
	}
	if cfg.Initialized != nil {
		var once sync.Once
		opts.InitializedHandler = func(_ context.Context, r *mcp.InitializedRequest) {
			once.Do(func() { cfg.Initialized(r.Session) })
		}
	}
	if id := cfg.SessionID; id != "" {
		opts.GetSessionID = func() string { return id }
	}
	s.server = mcp.NewServer(&mcp.Implementation{Name: name, Version: cfg.Version}, opts)
	// tools/list takes up the client's label first (what another of its
	// sessions showed it), and carries the session's label in its _meta
	// (LabelMeta), read-only: what "mandate mcp client" shows as the
	// session's label.
	s.server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/list" {
				return next(ctx, method, req)
			}
			if err := s.Sync(ctx); err != nil {
				return nil, err
			}
			res, err := next(ctx, method, req)
			if lr, ok := res.(*mcp.ListToolsResult); ok && err == nil {
				if lr.Meta == nil {
					lr.Meta = mcp.Meta{}
				}
				lr.Meta[LabelMeta] = s.task.Label()
			}
			return res, err
		}
	})
	if len(s.upstream) > 0 {
		s.server.AddReceivingMiddleware(s.passThroughMiddleware)
	}
	s.listTools()
	return s, nil
}

// Sync takes up the client's label (Config.Labels): the session's label
// rises to it, and tools/list changes when a tool became unavailable.
// Another session of the client calls it when it raised the client's
// label; the session calls it itself before each call and tools/list. An
// error (the store cannot be read, or the client was shown more than this
// session's clearance) refuses the call.
func (s *Session) Sync(ctx context.Context) error {
	if s.labels == nil {
		return nil
	}
	l, err := s.labels.Label(ctx)
	if err != nil {
		return kindapi.Errorf(abi.EINTERNAL, "the client's label cannot be read: %v", err)
	}
	before := s.task.Label()
	if err := s.task.Observe(l); err != nil {
		return kindapi.Errorf(abi.EFLOW, "the client has been shown %v, above what this session may be shown", l)
	}
	if s.task.Label().String() != before.String() {
		s.logger.Info("the session took up its client's label", "run", s.task.ID(), "label", s.task.Label().String())
		s.listTools()
	}
	return nil
}

// Server is the session's MCP server: run it on the connection's
// transport (mcp.StdioTransport, or per session behind
// mcp.NewStreamableHTTPHandler).
func (s *Session) Server() *mcp.Server { return s.server }

// Task is the session task.
func (s *Session) Task() *kernel.Task { return s.task }

// listTools (re)registers every tool with the description the policy
// gives it, marked unavailable, with why, when the session's label can
// no longer reach one of its sinks.
func (s *Session) listTools() {
	for _, name := range s.order {
		t := s.tools[name]
		desc := t.Description
		var meta mcp.Meta
		if why := s.unavailable(t); why != "" {
			desc = strings.TrimSuffix("[unavailable in this session: "+why+"] "+desc, " ")
			meta = mcp.Meta{UnavailableMeta: why}
		}
		s.server.AddTool(&mcp.Tool{Name: t.Name, Description: desc, InputSchema: json.RawMessage(t.InputSchema), Meta: meta},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return s.call(ctx, t, req), nil
			})
	}
}

// unavailable says why t cannot run at the session's label: a sink of
// one of its capabilities is not cleared for what the session has seen,
// or refuses a taint the session carries. "" when it can.
func (s *Session) unavailable(t *Tool) string {
	if _, err := s.blocked(t); err != nil {
		return kindapi.ErrnoOf(err).String() + ": " + err.Error()
	}
	return ""
}

// blocked is unavailable as the refusal (EFLOW) and the session's
// capability whose sink refuses; nil when t can run.
func (s *Session) blocked(t *Tool) (*kernel.Cap, error) {
	if t.Unavailable != "" {
		return nil, kindapi.Errorf(abi.EDENIED, "%s", t.Unavailable)
	}
	label := s.task.Label()
	if label.IsZero() {
		return nil, nil
	}
	for _, name := range t.Caps {
		c, ok := s.task.CapByName(SessionCapName(t.Name, name))
		if !ok {
			continue
		}
		kind := c.Kind()
		sink := kind.Describe(c.Scope()).Sink
		if sink == nil {
			continue
		}
		if !label.CanFlowTo(sink.Clearance) {
			return c, kindapi.Errorf(abi.EFLOW, "its %s capability %q is cleared for %v and the session has seen %v",
				kind.Name(), name, sink.Clearance.Conf(), label.Conf())
		}
		if taint, refused := sink.RefusedTaint(label); refused {
			if sink.RefusesTainted {
				return c, kindapi.Errorf(abi.EFLOW, "its %s capability %q accepts no untrusted data and the session is tainted by %v",
					kind.Name(), name, label.Integ())
			}
			return c, kindapi.Errorf(abi.EFLOW, "its %s capability %q refuses taints %v and the session is tainted by %s",
				kind.Name(), name, sink.RefusedTaints.List(), taint)
		}
	}
	return nil, nil
}

// refuse records a refusal of a call of t by the session (before or
// after its task) as a denial of the session task, audited, counted and
// shown like a task's, and returns it as the tool error the model sees.
// c is the session's capability concerned, when one is.
func (s *Session) refuse(ctx context.Context, t *Tool, c *kernel.Cap, err error) *mcp.CallToolResult {
	if aerr := s.task.Refuse(context.WithoutCancel(ctx), c, "tool:"+t.Name, err); aerr != err {
		s.logger.Error("recording a refused call", "tool", t.Name, "error", aerr)
		return toolError("%s: %v (and it could not be recorded: the call is refused)", kindapi.ErrnoOf(err), err)
	}
	return toolError("%s: %v", kindapi.ErrnoOf(err), err)
}

// toolError is a tool error result: what the model is shown.
func toolError(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: kindapi.EscapeText(fmt.Sprintf(format, args...))}}}
}

// call runs one tools/call as a child of the session task.
func (s *Session) call(ctx context.Context, t *Tool, req *mcp.CallToolRequest) *mcp.CallToolResult {
	if req.Session != nil {
		s.ap.mu.Lock()
		s.ap.peer = req.Session
		s.ap.mu.Unlock()
	}
	if state := req.Params.RequestState; state != "" {
		return s.resume(ctx, t, state, req)
	}
	raw := req.Params.Arguments
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage(`{}`)
	}
	if len(raw) > MaxArgBytes {
		return s.refuse(ctx, t, nil, kindapi.Errorf(abi.ELIMIT, "arguments of %d bytes exceed %d", len(raw), MaxArgBytes))
	}
	if err := abi.CheckJSON(raw); err != nil {
		return s.refuse(ctx, t, nil, kindapi.Errorf(abi.EINVAL, "the arguments: %v", err))
	}
	var args any
	if err := json.Unmarshal(raw, &args); err != nil {
		return s.refuse(ctx, t, nil, kindapi.Errorf(abi.EINVAL, "the arguments: %v", err))
	}
	if err := s.schemas[t.Name].Validate(args); err != nil {
		return s.refuse(ctx, t, nil, kindapi.Errorf(abi.EINVAL, "the arguments do not match the tool's schema: %v", err))
	}
	// What the client was shown in its other sessions counts here too.
	if err := s.Sync(ctx); err != nil {
		return s.refuse(ctx, t, nil, err)
	}
	if c, err := s.blocked(t); err != nil {
		return s.refuse(ctx, t, c, err)
	}
	// References in the arguments: the blob goes into the tool's table,
	// unread, and the tool is given {"mandate_blob": HANDLE}.
	var held []*kindapi.Blob
	args, err := s.resolveRefs(args, &held)
	if err != nil {
		return s.refuse(ctx, t, nil, err)
	}
	input, _ := json.Marshal(args)
	spec := kernel.ChildSpec{Module: t.Module, Name: t.Name, Entry: t.Entry, Limits: t.Limits, Input: input, Held: held}
	for _, name := range t.Caps {
		c, _ := s.task.CapByName(SessionCapName(t.Name, name))
		spec.Caps = append(spec.Caps, kernel.PassedCap{Name: name, Cap: c})
	}
	// Registered before it runs: the task's first call may need the
	// person's yes, and the approver finds the call by its task (CI found
	// a task asking before it was registered, refused unasked).
	var rc *running
	spec.Made = func(task *kernel.Task) {
		rc = &running{task: task, client: t.ClientApproval, asks: make(chan approvalAsk)}
		s.mu.Lock()
		s.calls++
		s.mu.Unlock()
		s.ap.mu.Lock()
		s.ap.byTask[task.ID()] = rc
		s.ap.mu.Unlock()
	}
	// The task outlives this request when it waits for the person's
	// answer (a multi round-trip call); a canceled call kills it (await).
	// A refused start leaves nothing behind (kernel.Task.StartChild).
	task, err := s.task.StartChild(ctx, spec)
	if err != nil {
		return toolError("%s: %v", kindapi.ErrnoOf(err), err)
	}
	s.progress(ctx, req, task)
	return s.await(ctx, t, rc)
}

// resume is a client's retry of a call that asked the person: the answer
// goes to the waiting approver, and the call goes on.
func (s *Session) resume(ctx context.Context, t *Tool, state string, req *mcp.CallToolRequest) *mcp.CallToolResult {
	s.ap.mu.Lock()
	a := s.ap.byState[state]
	delete(s.ap.byState, state)
	s.ap.mu.Unlock()
	if a == nil || a.call.task.Module() != t.Module.Digest() {
		return toolError("EINVAL: no call of this session is waiting for that answer")
	}
	r, _ := req.Params.InputResponses["approve"].(*mcp.ElicitResult)
	if a.ask.answer == nil {
		// A URL-mode elicitation: the client's accept approves nothing
		// (the person answers on the page); its decline is a no.
		if (r == nil || r.Action != "accept") && s.ap.Decline != nil {
			action := "no answer"
			if r != nil {
				action = kindapi.Printable(r.Action)
			}
			if err := s.ap.Decline(context.WithoutCancel(ctx), a.ask.id, "the MCP client answered "+action); err != nil {
				s.logger.Debug("the client's decline of an approval", "approval", a.ask.id, "error", err)
			}
		}
	} else {
		yes := false
		if r != nil {
			v, _ := r.Content["approve"].(bool)
			yes = r.Action == "accept" && v
		}
		a.ask.answer <- yes
	}
	s.progress(ctx, req, a.call.task)
	return s.await(ctx, t, a.call)
}

// await waits for a call's task: its end is the result; a question for
// the person is handed to the client (an input request, with a state the
// client's retry brings back); the client canceling kills the task.
func (s *Session) await(ctx context.Context, t *Tool, rc *running) *mcp.CallToolResult {
	task := rc.task
	select {
	case <-task.Done():
	case ask := <-rc.asks:
		var r [16]byte
		rand.Read(r[:])
		state := hex.EncodeToString(r[:])
		s.ap.mu.Lock()
		s.ap.byState[state] = &asked{call: rc, ask: ask}
		s.ap.mu.Unlock()
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"approve": ask.params}, RequestState: state}
	case <-ctx.Done():
		task.Kill()
		<-task.Done()
	}
	s.ap.mu.Lock()
	delete(s.ap.byTask, task.ID())
	s.ap.mu.Unlock()
	if s.called != nil {
		s.called()
	}
	if ctx.Err() != nil {
		// The client canceled the call: it is shown nothing of the
		// result, so what the result carries does not raise its label.
		return toolError("ECANCELED: the client canceled the call; its result is not shown")
	}
	return withEffects(s.result(t, task), s.effects, task.ID())
}

// EffectsMeta is the _meta key of what a tool call did outside the
// kernel, from the audit log: a list of {"kind", "op", "summary",
// "outcome", "errno"}, what was done beside what the tool's result says.
// Absent when the call did nothing outside the kernel.
const EffectsMeta = "mandate/effects"

// effectMeta is one effect as a tool result's _meta lists it.
type effectMeta struct {
	Kind    string `json:"kind"`
	Op      string `json:"op"`
	Summary string `json:"summary"`
	Outcome string `json:"outcome"`
	Errno   string `json:"errno,omitempty"`
}

// withEffects adds to res the effects the call's task had.
func withEffects(res *mcp.CallToolResult, effects func(string) []runstore.Effect, task string) *mcp.CallToolResult {
	if effects == nil || res == nil {
		return res
	}
	es := effects(task)
	if len(es) == 0 {
		return res
	}
	list := make([]effectMeta, len(es))
	for i, e := range es {
		list[i] = effectMeta{Kind: e.Kind, Op: e.Op, Summary: e.Summary, Outcome: e.Outcome, Errno: e.Errno}
	}
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	res.Meta[EffectsMeta] = list
	return res
}

// UnavailableMeta is the _meta key of a tool that tools/list gives as
// unavailable at the session's label: why (the errno and the reason, as
// its description says after "[unavailable in this session: ").
const UnavailableMeta = "mandate/unavailable"

// LabelMeta is the _meta key of a tool result's label ({"conf": [...],
// "integ": [...]}): what influenced the result and whose data it holds;
// on a tools/list result, the session's label: what the session has been
// shown, which decides the tools it may still call.
const LabelMeta = "mandate/label"

// result is what an ended call returns.
func (s *Session) result(t *Tool, task *kernel.Task) *mcp.CallToolResult {
	err := task.Wait(context.Background())
	if err != nil {
		if e, why := task.LastDenial(); t.Upstream != "" && e != abi.ESUCCESS {
			// The call's one call was refused: the kernel's reason is
			// the whole story.
			return toolError("%s: tool %s: %s", e, t.Name, why)
		}
		return toolError("%s: tool %s: %v", errnoOfTask(task, err), t.Name, err)
	}
	b := task.ResultBlob()
	if b == nil {
		return &mcp.CallToolResult{Content: []mcp.Content{}}
	}
	if t.ByReference {
		if t.Upstream != "" {
			b = upstreamValue(b)
		}
		id, err := s.keep(b)
		if err != nil {
			return s.refuse(context.Background(), t, nil, err)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(
			"%s%s (%d bytes, labelled %s; pass it to another tool's argument: you are not shown its content)",
			RefScheme, id, b.Len(), b.Label())}}}
	}
	// By value: the model is shown it, so the session has now seen it.
	shown := shownLabel(t, b.Label())
	if err := s.show(context.Background(), t.Name, shown); err != nil {
		return s.refuse(context.Background(), t, nil, err)
	}
	data := b.Bytes()
	if t.Upstream != "" {
		return upstreamResult(t, data, shown)
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: textOf(data)}}}
	// The answer's provenance travels with it, for the client to show
	// (which sources influenced it, whose data it holds).
	if !shown.IsZero() {
		res.Meta = mcp.Meta{LabelMeta: shown}
	}
	if json.Valid(data) {
		var v map[string]any
		if json.Unmarshal(data, &v) == nil {
			res.StructuredContent = v
		}
	}
	return res
}

// upstreamResult is an upstream tool's answer (its CallToolResult, as
// the mcp capability returned it) as the client is shown it, with its
// label in _meta; the upstream's own _meta is not passed on.
func upstreamResult(t *Tool, data []byte, shown kindapi.Label) *mcp.CallToolResult {
	var res mcp.CallToolResult
	if err := json.Unmarshal(data, &res); err != nil {
		return toolError("EIO: tool %s: the upstream's answer is not a tool result: %v", t.Name, err)
	}
	if res.Content == nil {
		res.Content = []mcp.Content{}
	}
	res.Meta = nil
	res.InputRequests, res.RequestState = nil, ""
	if !shown.IsZero() {
		res.Meta = mcp.Meta{LabelMeta: shown}
	}
	return &res
}

// shownLabel is what a result of t labelled l carries when shown to the
// client: l, or, when the policy says what t's sinks answer (responses),
// those confidentiality tags and l's integrity taints with its own.
func shownLabel(t *Tool, l kindapi.Label) kindapi.Label {
	if t.Responses == nil {
		return l
	}
	integ := append(slices.Clone(l.Integ()), t.Responses.Integ()...)
	return kindapi.NewLabel(t.Responses.Conf(), integ)
}

// textOf is a result as text: its bytes when UTF-8, else a note.
func textOf(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return fmt.Sprintf("(%d bytes that are not UTF-8 text)", len(b))
}

// errnoOfTask names why a tool's task failed: the kernel's refusal that
// ended it when there was one, else what ended it.
func errnoOfTask(t *kernel.Task, err error) string {
	if e, _ := t.LastDenial(); e != abi.ESUCCESS {
		return e.String()
	}
	switch t.State() {
	case kernel.TaskTimedOut:
		return abi.ETIMEDOUT.String()
	case kernel.TaskOutOfMemory:
		return abi.ELIMIT.String()
	}
	if e := kindapi.ErrnoOf(err); e != abi.EINTERNAL && e != abi.ESUCCESS {
		return e.String()
	}
	return abi.ECHILD.String()
}

// keep holds b in the session task's table and returns a reference to it
// that only this session can use.
func (s *Session) keep(b *kindapi.Blob) (string, error) {
	if err := s.task.CanHold(b.Label()); err != nil {
		return "", err
	}
	var r [16]byte
	rand.Read(r[:])
	id := hex.EncodeToString(r[:])
	s.mu.Lock()
	s.refs[id] = b
	s.mu.Unlock()
	return id, nil
}

// resolveRefs replaces every string of args that is a reference of this
// session with {"mandate_blob": HANDLE}, the handle the blob will have in
// the tool's table (kernel.HeldHandle), and appends the blob to held.
func (s *Session) resolveRefs(v any, held *[]*kindapi.Blob) (any, error) {
	switch x := v.(type) {
	case string:
		if !strings.HasPrefix(x, RefScheme) {
			return x, nil
		}
		s.mu.Lock()
		b, ok := s.refs[strings.TrimPrefix(x, RefScheme)]
		s.mu.Unlock()
		if !ok {
			return nil, kindapi.Errorf(abi.EBADHANDLE, "%s is not a reference of this session", kindapi.Printable(x))
		}
		h := kernel.HeldHandle(len(*held))
		*held = append(*held, b)
		return map[string]any{"mandate_blob": uint32(h)}, nil
	case []any:
		for i := range x {
			r, err := s.resolveRefs(x[i], held)
			if err != nil {
				return nil, err
			}
			x[i] = r
		}
	case map[string]any:
		for k := range x {
			r, err := s.resolveRefs(x[k], held)
			if err != nil {
				return nil, err
			}
			x[k] = r
		}
	}
	return v, nil
}

// progress sends progress notifications while task runs, when the
// client asked for them (a progress token).
func (s *Session) progress(ctx context.Context, req *mcp.CallToolRequest, task *kernel.Task) {
	tok := req.Params.GetProgressToken()
	if tok == nil || req.Session == nil {
		return
	}
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		start := time.Now()
		for {
			select {
			case <-task.Done():
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok,
					Progress: time.Since(start).Seconds(), Message: "tool " + task.ID() + " running"})
			}
		}
	}()
}

// Approve asks the person when a use needs their yes: the question is
// the kernel's account of what it will do (kernel.ApprovalRequest.Text:
// payee, amount, URL, the effect's digest), never what the model said.
// It goes to the person out of band; only a call of a tool with
// approval = "client", not a payment, is asked by the client's form
// (SEP-2322 input request; the SDK asks clients of older protocols
// itself), when the client can show one.
func (a *Approvals) Approve(ctx context.Context, r kernel.ApprovalRequest) (kernel.Answer, error) {
	a.mu.Lock()
	peer, rc := a.peer, a.byTask[r.Task]
	a.mu.Unlock()
	if rc != nil && rc.client && r.Kind != "pay" && canElicit(peer, "form") {
		return a.client(ctx, rc, r)
	}
	return a.person.Approve(context.WithValue(ctx, callKey{}, rc), r)
}

// callKey carries the call whose approval is asked to Asked.
type callKey struct{}

// client asks the client's form.
func (a *Approvals) client(ctx context.Context, rc *running, r kernel.ApprovalRequest) (kernel.Answer, error) {
	const by = "the MCP client's form (approval = \"client\": its yes may be the model's own)"
	ask := approvalAsk{answer: make(chan bool, 1), params: &mcp.ElicitParams{
		Mode:    "form",
		Message: "Mandate asks you, not the model, to approve this:\n" + r.Text(),
		RequestedSchema: map[string]any{"type": "object", "required": []string{"approve"},
			"properties": map[string]any{"approve": map[string]any{"type": "boolean", "description": "Approve it"}}},
	}}
	select {
	case rc.asks <- ask:
	case <-ctx.Done():
		return kernel.Answer{Channel: kernel.ChannelClient, By: "the call ended"}, nil
	}
	select {
	case yes := <-ask.answer:
		return kernel.Answer{Yes: yes, Channel: kernel.ChannelClient, By: by}, nil
	case <-ctx.Done():
		return kernel.Answer{Channel: kernel.ChannelClient, By: "the call ended"}, nil
	}
}

// Asked is told that the person is asked (pending approval id, out of
// band) for a call's use: when the client can show a URL-mode
// elicitation and the approval page is up (URL), the call hands it to
// the client, for it to show the person where to answer. It never waits
// for the client's answer.
func (a *Approvals) Asked(ctx context.Context, id, text string) {
	rc, _ := ctx.Value(callKey{}).(*running)
	a.mu.Lock()
	peer := a.peer
	a.mu.Unlock()
	if rc == nil || a.URL == nil || !canElicit(peer, "url") {
		return
	}
	u, ok := a.URL(id)
	if !ok {
		return
	}
	ask := approvalAsk{id: id, params: &mcp.ElicitParams{
		Mode: "url", URL: u, ElicitationID: id,
		Message: "Mandate asks the person, out of band, to approve this (open the page, or run: mandate approvals show " + id +
			"); an answer here approves nothing:\n" + text,
	}}
	select {
	case rc.asks <- ask:
	case <-ctx.Done():
	case <-rc.task.Done():
	}
}

// canElicit reports whether the client declared elicitation in mode
// ("form" or "url"); a bare elicitation capability is form only.
func canElicit(peer *mcp.ServerSession, mode string) bool {
	if peer == nil || peer.InitializeParams() == nil || peer.InitializeParams().Capabilities == nil {
		return false
	}
	e := peer.InitializeParams().Capabilities.Elicitation
	switch {
	case e == nil:
		return false
	case mode == "url":
		return e.URL != nil
	default:
		return e.Form != nil || e.URL == nil
	}
}
