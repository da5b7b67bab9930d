// Package mcpserve serves tools over the Model Context Protocol (the
// official Go SDK, github.com/modelcontextprotocol/go-sdk) as Mandate
// tasks: "mandate mcp serve POLICY.hcl".
//
// A client's connection is a Session, and the session is a kernel task
// with a floating label: it holds every tool's capabilities (as
// TOOL.CAP) and runs nothing; its label rises by the label of every result
// returned to the client, since the client's model has now seen it. Each
// tools/call is a fresh task, a child of the session task
// (kernel.NewChild), holding exactly its tool's capabilities (passed from
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
// a person's yes is asked through the client (Approver).
//
// What it does not do: it offers tools only (no resources, prompts or
// completions), a result is one text item (and structured content when it
// is a JSON object), tools cannot ask the client for sampling, and the
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
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel"
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
}

// SessionCapName is the name under which the session task holds a tool's
// capability.
func SessionCapName(tool, cap string) string { return tool + "." + cap }

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

	mu    sync.Mutex
	refs  map[string]*kernel.Blob // protected by mu
	calls int                     // protected by mu
	peer  *mcp.ServerSession      // the client, as its last call came; protected by mu
	// Calls waiting for the person's answer (multi round-trip requests:
	// the call returns its input request, the client retries with the
	// answer): by the tool task asking, and by the request state handed
	// to the client.
	byTask  map[string]*running // protected by mu
	byState map[string]*asked   // protected by mu
}

// running is a call whose task runs.
type running struct {
	task *kernel.Task
	asks chan approvalAsk // from the approver, to the call
}

// approvalAsk is one question for the person.
type approvalAsk struct {
	params *mcp.ElicitParams
	answer chan bool
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
	// Called, when set, is called after each call's task ended (to record
	// the session so far).
	Called func()
}

// NewSession makes the MCP server of one client connection.
func NewSession(cfg Config) (*Session, error) {
	if cfg.Kernel == nil || cfg.Task == nil {
		return nil, errors.New("mcpserve: no kernel or session task")
	}
	s := &Session{k: cfg.Kernel, task: cfg.Task, called: cfg.Called, tools: map[string]*Tool{}, logger: cfg.Logger,
		schemas: map[string]*jsonschema.Resolved{}, refs: map[string]*kernel.Blob{},
		byTask: map[string]*running{}, byState: map[string]*asked{}}
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
	if cfg.Initialized != nil {
		var once sync.Once
		opts.InitializedHandler = func(_ context.Context, r *mcp.InitializedRequest) {
			once.Do(func() { cfg.Initialized(r.Session) })
		}
	}
	s.server = mcp.NewServer(&mcp.Implementation{Name: name, Version: cfg.Version}, opts)
	s.listTools()
	return s, nil
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
		if why := s.unavailable(t); why != "" {
			desc = "[unavailable in this session: " + why + "] " + desc
		}
		s.server.AddTool(&mcp.Tool{Name: t.Name, Description: desc, InputSchema: json.RawMessage(t.InputSchema)},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return s.call(ctx, t, req), nil
			})
	}
}

// unavailable says why t cannot run at the session's label: a sink of
// one of its capabilities is not cleared for what the session has seen,
// or refuses a taint the session carries. "" when it can.
func (s *Session) unavailable(t *Tool) string {
	label := s.task.Label()
	if label.IsZero() {
		return ""
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
			return fmt.Sprintf("EFLOW: its %s capability %q is cleared for %v and the session has seen %v",
				kind.Name(), name, sink.Clearance.Conf(), label.Conf())
		}
		if taint, refused := sink.RefusedTaint(label); refused {
			if sink.RefusesTainted {
				return fmt.Sprintf("EFLOW: its %s capability %q accepts no untrusted data and the session is tainted by %v",
					kind.Name(), name, label.Integ())
			}
			return fmt.Sprintf("EFLOW: its %s capability %q refuses taints %v and the session is tainted by %s",
				kind.Name(), name, sink.RefusedTaints.List(), taint)
		}
	}
	return ""
}

// toolError is a tool error result: what the model is shown.
func toolError(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: kernel.EscapeText(fmt.Sprintf(format, args...))}}}
}

// call runs one tools/call as a child of the session task.
func (s *Session) call(ctx context.Context, t *Tool, req *mcp.CallToolRequest) *mcp.CallToolResult {
	if req.Session != nil {
		s.mu.Lock()
		s.peer = req.Session
		s.mu.Unlock()
	}
	if state := req.Params.RequestState; state != "" {
		return s.resume(ctx, t, state, req)
	}
	raw := req.Params.Arguments
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage(`{}`)
	}
	if len(raw) > MaxArgBytes {
		return toolError("ELIMIT: arguments of %d bytes exceed %d", len(raw), MaxArgBytes)
	}
	if err := abi.CheckJSON(raw); err != nil {
		return toolError("EINVAL: the arguments: %v", err)
	}
	var args any
	if err := json.Unmarshal(raw, &args); err != nil {
		return toolError("EINVAL: the arguments: %v", err)
	}
	if err := s.schemas[t.Name].Validate(args); err != nil {
		return toolError("EINVAL: the arguments do not match the tool's schema: %v", err)
	}
	if why := s.unavailable(t); why != "" {
		return toolError("%s", why)
	}
	p, err := s.k.NewChild(s.task, kernel.TaskSpec{Module: t.Module, Principal: s.task.Principal(), Name: t.Name,
		Entry: t.Entry, Limits: t.Limits})
	if err != nil {
		return toolError("%s: %v", kernel.ErrnoOf(err), err)
	}
	// References in the arguments: the blob goes into the tool's table,
	// unread, and the tool is given {"mandate_blob": HANDLE}.
	args, err = s.resolveRefs(args, p)
	if err != nil {
		return toolError("%s: %v", kernel.ErrnoOf(err), err)
	}
	input, _ := json.Marshal(args)
	if err := p.SetInput(input, kernel.Label{}); err != nil {
		return toolError("%s: %v", kernel.ErrnoOf(err), err)
	}
	// The capabilities last: a call refused from here on gives them back
	// (Discard), so a refused call leaves nothing live behind.
	for _, name := range t.Caps {
		c, _ := s.task.CapByName(SessionCapName(t.Name, name))
		if err := p.Pass(ctx, c, name); err != nil {
			p.Discard()
			return toolError("%s: %v", kernel.ErrnoOf(err), err)
		}
	}
	// Registered before it starts: the task's first call may need the
	// person's yes, and the approver finds the call by its task (CI found
	// a task asking before it was registered, refused unasked).
	task := p.Task()
	rc := &running{task: task, asks: make(chan approvalAsk)}
	s.mu.Lock()
	s.calls++
	s.byTask[task.ID()] = rc
	s.mu.Unlock()
	// The task outlives this request when it waits for the person's
	// answer (a multi round-trip call); a canceled call kills it (await).
	if err := p.Start(context.Background()); err != nil {
		s.mu.Lock()
		s.calls--
		delete(s.byTask, task.ID())
		s.mu.Unlock()
		p.Discard()
		return toolError("%s: %v", kernel.ErrnoOf(err), err)
	}
	s.progress(ctx, req, task)
	return s.await(ctx, t, rc)
}

// resume is a client's retry of a call that asked the person: the answer
// goes to the waiting approver, and the call goes on.
func (s *Session) resume(ctx context.Context, t *Tool, state string, req *mcp.CallToolRequest) *mcp.CallToolResult {
	s.mu.Lock()
	a := s.byState[state]
	delete(s.byState, state)
	s.mu.Unlock()
	if a == nil || a.call.task.Module() != t.Module.Digest() {
		return toolError("EINVAL: no call of this session is waiting for that answer")
	}
	yes := false
	if r, ok := req.Params.InputResponses["approve"].(*mcp.ElicitResult); ok && r != nil {
		v, _ := r.Content["approve"].(bool)
		yes = r.Action == "accept" && v
	}
	a.ask.answer <- yes
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
		s.mu.Lock()
		s.byState[state] = &asked{call: rc, ask: ask}
		s.mu.Unlock()
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"approve": ask.params}, RequestState: state}
	case <-ctx.Done():
		task.Kill()
		<-task.Done()
	}
	s.mu.Lock()
	delete(s.byTask, task.ID())
	s.mu.Unlock()
	if s.called != nil {
		s.called()
	}
	return s.result(t, task)
}

// LabelMeta is the _meta key of a tool result's label ({"conf": [...],
// "integ": [...]}): what influenced the result and whose data it holds.
const LabelMeta = "mandate/label"

// result is what an ended call returns.
func (s *Session) result(t *Tool, task *kernel.Task) *mcp.CallToolResult {
	err := task.Wait(context.Background())
	if err != nil {
		return toolError("%s: tool %s: %v", errnoOfTask(task, err), t.Name, err)
	}
	b := task.ResultBlob()
	if b == nil {
		return &mcp.CallToolResult{Content: []mcp.Content{}}
	}
	if t.ByReference {
		id, err := s.keep(b)
		if err != nil {
			return toolError("%s: %v", kernel.ErrnoOf(err), err)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(
			"%s%s (%d bytes, labelled %s; pass it to another tool's argument: you are not shown its content)",
			RefScheme, id, b.Len(), b.Label())}}}
	}
	// By value: the model is shown it, so the session has now seen it.
	before := s.task.Label()
	if err := s.task.Observe(b.Label()); err != nil {
		return toolError("EFLOW: the result is labelled %v, above what this session may be shown", b.Label())
	}
	if s.task.Label().String() != before.String() {
		s.listTools() // some tools may have become unavailable
	}
	data := b.Bytes()
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: textOf(data)}}}
	// The answer's provenance travels with it, for the client to show
	// (which sources influenced it, whose data it holds).
	if l := b.Label(); !l.IsZero() {
		res.Meta = mcp.Meta{LabelMeta: l}
	}
	if json.Valid(data) {
		var v map[string]any
		if json.Unmarshal(data, &v) == nil {
			res.StructuredContent = v
		}
	}
	return res
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
	if e := kernel.ErrnoOf(err); e != abi.EINTERNAL && e != abi.ESUCCESS {
		return e.String()
	}
	return abi.ECHILD.String()
}

// keep holds b in the session task's table and returns a reference to it
// that only this session can use.
func (s *Session) keep(b *kernel.Blob) (string, error) {
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
// session with {"mandate_blob": HANDLE}, the blob held by the tool's task.
func (s *Session) resolveRefs(v any, p *kernel.PendingTask) (any, error) {
	switch x := v.(type) {
	case string:
		if !strings.HasPrefix(x, RefScheme) {
			return x, nil
		}
		s.mu.Lock()
		b, ok := s.refs[strings.TrimPrefix(x, RefScheme)]
		s.mu.Unlock()
		if !ok {
			return nil, kernel.Errorf(abi.EBADHANDLE, "%s is not a reference of this session", kernel.Printable(x))
		}
		h, err := p.Hold(b)
		if err != nil {
			return nil, err
		}
		return map[string]any{"mandate_blob": uint32(h)}, nil
	case []any:
		for i := range x {
			r, err := s.resolveRefs(x[i], p)
			if err != nil {
				return nil, err
			}
			x[i] = r
		}
	case map[string]any:
		for k := range x {
			r, err := s.resolveRefs(x[k], p)
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

// Approver asks the person through the client (MCP elicitation) when a
// use needs their yes: the question is the kernel's account of what it
// will do (kernel.ApprovalRequest.Text: payee, amount, URL), never what
// the model said. The call returns the question as an input request
// (SEP-2322; the SDK asks clients of older protocols itself) and the task
// waits for the client's retry with the answer. A client that cannot be
// asked, or a use outside a call of this session, gets fallback's answer.
func (s *Session) Approver(fallback kernel.Approver) kernel.Approver {
	return kernel.ApproverFunc(func(ctx context.Context, r kernel.ApprovalRequest) (bool, error) {
		s.mu.Lock()
		peer, rc := s.peer, s.byTask[r.Task]
		s.mu.Unlock()
		if rc == nil || peer == nil || peer.InitializeParams() == nil || peer.InitializeParams().Capabilities == nil ||
			peer.InitializeParams().Capabilities.Elicitation == nil {
			return fallback.Approve(ctx, r)
		}
		ask := approvalAsk{answer: make(chan bool, 1), params: &mcp.ElicitParams{
			Message: "Mandate asks you, not the model, to approve this:\n" + r.Text(),
			RequestedSchema: map[string]any{"type": "object", "required": []string{"approve"},
				"properties": map[string]any{"approve": map[string]any{"type": "boolean", "description": "Approve it"}}},
		}}
		select {
		case rc.asks <- ask:
		case <-ctx.Done():
			return false, nil
		}
		select {
		case yes := <-ask.answer:
			return yes, nil
		case <-ctx.Done():
			return false, nil
		}
	})
}
