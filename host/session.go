package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/manifest"
	"github.com/mandatevm/mandate/runstore"
	"github.com/mandatevm/mandate/sandbox"
)

// Sessions. A host serves a policy (manifest.Policy: a session block and
// tool blocks) to clients the kernel does not run, such as an MCP client's
// model: each client's connection is a session, a run like any other (in
// the run store, on the host's engine and compiled modules, its kernel
// configured as every run's is, its events streamed to subscribers),
// whose root task holds every tool's capabilities and runs nothing. Its
// label rises with what the host shows the client (kernel.Task.Observe);
// each thing the client asks for is a child the host starts
// (kernel.Task.StartChild) holding exactly its tool's capabilities, passed
// from the session task's, so uses and budgets hold across calls. A tool
// may spawn children of its own under a spawn capability, placed on a
// fleet node when the host's runs are (SessionSpec.Placer).

// SessionCapName is the name under which a session task holds a tool's
// capability.
func SessionCapName(tool, cap string) string { return tool + "." + cap }

// Policy is a policy pinned for serving sessions: its tools' modules (and
// those their spawn capabilities name) read or built once, their digests
// checked, and the data store seeded. A module file changed later is not
// read again: sessions run what was pinned.
type Policy struct {
	policy *manifest.Policy
	tools  []pinnedTool
}

type pinnedTool struct {
	t      *manifest.Tool // a copy: its spawn caps name modules by digest
	wasm   []byte
	digest string
	spawn  map[string]spawnModule
}

// Manifest is the policy as loaded.
func (p *Policy) Manifest() *manifest.Policy { return p.policy }

// PinPolicy reads or builds the modules of p's tools and of their spawn
// capabilities, checks each against its pinned digest, and imports the
// session's seeds into the data store.
func (h *Host) PinPolicy(ctx context.Context, p *manifest.Policy) (*Policy, error) {
	if p == nil {
		return nil, errors.New("host: no policy")
	}
	pp := &Policy{policy: p}
	for _, t := range p.Tools {
		if t.Upstream != "" {
			// No module: the tool is a call on its mcp capability, whose
			// grant pins the upstream tool's definition.
			tc := *t
			pp.tools = append(pp.tools, pinnedTool{t: &tc})
			continue
		}
		var wasm []byte
		var err error
		if t.ModuleIsDir {
			wasm, err = BuildGuest(ctx, t.ModulePath, false, h.opts.CacheDir)
		} else {
			wasm, err = os.ReadFile(t.ModulePath)
		}
		if err != nil {
			return nil, t.ModuleError(err)
		}
		digest := sandbox.Digest(wasm)
		if err := t.CheckDigest(digest); err != nil {
			return nil, err
		}
		tc := *t
		tc.Caps = slices.Clone(t.Caps)
		spawn, err := readSpawnModules(ctx, tc.Caps, p.Dir, h.opts.CacheDir, digest)
		if err != nil {
			return nil, err
		}
		pp.tools = append(pp.tools, pinnedTool{t: &tc, wasm: wasm, digest: digest, spawn: spawn})
		h.opts.Logger.Info("tool pinned", "tool", t.Name, "digest", digest)
	}
	if err := SeedTo(ctx, p.Session.Seeds, h.opts.DataStore); err != nil {
		return nil, err
	}
	return pp, nil
}

// SessionSpec is a session to start.
type SessionSpec struct {
	// Policy is what the session serves.
	Policy *Policy
	// Approver answers the session's approvals (asking the person through
	// the client); default Options.Approver. It is the kernel's from its
	// start.
	Approver kernel.Approver
	// Logger is the session's logger; default Options.Logger.
	Logger hclog.Logger
	// Placer runs the children a tool's spawn capability places on other
	// nodes, as RunSpec.Placer.
	Placer kernel.Placer
	// Begun, when set, is called with the run's id once the session is in
	// the run store.
	Begun func(id string)
	// Client names the client the session serves (an MCP client: its
	// token's name, or --client). The run records it (as its module,
	// SessionModule+":"+Client) and so does the log's "session started".
	Client string
	// Label is what the client has been shown before this session (its
	// stored label): the session task starts at it. A label above the
	// session's clearance refuses the session.
	Label kindapi.Label
}

// SessionTool is one tool as a session runs it.
type SessionTool struct {
	Name        string
	Description string          // from the policy
	InputSchema json.RawMessage // a JSON Schema of type object
	ByReference bool            // results go back by reference, unread
	Module      sandbox.Module  // compiled on the host's engine
	Entry       string
	Limits      kernel.Limits
	// Caps are the tool's capability names; the session task holds each
	// as SessionCapName(Name, cap).
	Caps []string
	// ClientApproval: the policy's approval = "client" (the MCP client's
	// form answers its approvals, never a payment's).
	ClientApproval bool
	// Responses, when set, is what the tool's results carry in place of
	// the confidentiality of what was sent to its sinks (the policy's
	// responses: manifest.ToolResponses).
	Responses *kindapi.Label
	// Upstream is the upstream tool's name when the tool is a tool of an
	// upstream MCP server (Module is then an UpstreamModule, its result
	// the upstream's CallToolResult as JSON); "" for a module's tool.
	Upstream string
	// Unavailable, when set, says why the tool cannot be called in this
	// session whatever its label: an upstream tool whose definition is not
	// the one its capability pins, or whose server could not be reached
	// when the session started.
	Unavailable string
}

// Session is a running session: a Run whose root task is the session
// task. End it with End.
type Session struct {
	*Run
	tools   []SessionTool
	end     chan struct{} // closed by End: the session task returns
	endOnce sync.Once
}

// Tools are the session's tools, in the policy's order.
func (s *Session) Tools() []SessionTool { return slices.Clone(s.tools) }

// End ends the session, as its client leaving does: the session task
// returns (a normal end: the task and the run are done, nothing is logged
// as an error), any call still running is killed with it, and the run is
// recorded. It returns once the run is recorded.
func (s *Session) End() {
	s.ended.Store(true)
	s.endOnce.Do(func() { close(s.end) })
	<-s.done
}

// sessionModule is the session task's module: it runs no code, and
// returns when the session ends (End: done) or its context does (Kill, the
// session's timeout: killed).
type sessionModule struct {
	sandbox.IdleModule
	end <-chan struct{}
}

func (m sessionModule) Run(ctx context.Context, _ sandbox.RunConfig) error {
	select {
	case <-ctx.Done():
		return sandbox.ErrCanceled
	case <-m.end:
		return nil
	}
}

// The run store's names for a session's run.
const (
	SessionTaskName = "mcp-session"
	SessionModule   = "mcp"
)

// StartSession starts a session of spec.Policy: a run recorded from its
// start, whose root task holds every tool's capabilities (as
// SessionCapName(tool, cap)) within the session's clearance, for the
// session's lifetime (its timeout, default 24 hours), with each tool's
// module compiled on the host's engine. Canceling ctx ends the session as
// Kill does. A session refused before its task ran is recorded as refused
// and StartSession returns a *RefusedError.
func (h *Host) StartSession(ctx context.Context, spec SessionSpec) (*Session, error) {
	return starting(h, func() (*Session, error) { return h.startSession(ctx, spec) })
}

func (h *Host) startSession(ctx context.Context, spec SessionSpec) (*Session, error) {
	if spec.Policy == nil {
		return nil, errors.New("host: no policy")
	}
	p := spec.Policy.policy
	logger, approver := h.defaults(spec.Logger, spec.Approver)
	abs, _ := filepath.Abs(p.Path)
	started := time.Now()
	module := SessionModule
	if spec.Client != "" {
		module += ":" + spec.Client
	}
	r, err := h.newRun(ctx, runstore.Run{
		ID: NewRunID(started), Manifest: abs, Task: SessionTaskName, Module: module, Digest: sandbox.IdleModule{}.Digest(),
		Principal: p.Session.Principal, Engine: h.opts.Engine, Started: started.UTC(),
	}, runConfig{logger: logger, approver: approver, placer: spec.Placer, begun: spec.Begun})
	if err != nil {
		return nil, err
	}
	s := &Session{Run: r, end: make(chan struct{})}
	refuse := func(err error) (*Session, error) {
		_, err = r.refused(err)
		return nil, err
	}
	if c := p.Session.Clearance; c != nil && !spec.Label.CanFlowTo(*c) {
		return refuse(fmt.Errorf("the client %q has been shown %v, above the session's clearance %v "+
			"(its label, kept across its sessions, falls only by \"mandate mcp reset\" or the policy's label_ttl)", spec.Client, spec.Label, *c))
	}
	var grants []kernel.GrantSpec
	for _, pt := range spec.Policy.tools {
		t := pt.t
		if t.Upstream != "" {
			tool, gs, err := r.upstreamTool(ctx, t)
			if err != nil {
				return refuse(err)
			}
			grants = append(grants, gs...)
			s.tools = append(s.tools, tool)
			continue
		}
		cfg := toolLimits(t.Limits(), p.Session.Limits()).CompileLimits()
		mod, err := r.compile(ctx, pt.wasm, pt.digest, cfg)
		if err != nil {
			return refuse(t.ModuleError(err))
		}
		r.modules.setRoot(mod) // a tool may spawn its own kind
		if err := r.addModules(ctx, pt.spawn, cfg); err != nil {
			return refuse(err)
		}
		gs, err := t.Grants(r.k)
		if err != nil {
			return refuse(err)
		}
		tool := SessionTool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema,
			ByReference: t.Result == manifest.ResultReference, Module: mod, Entry: t.Entry, Limits: t.Limits(),
			ClientApproval: t.Approval == manifest.ApprovalClient}
		if r := t.Responses; r != nil {
			var integ []string
			if r.Taint != "" {
				integ = []string{r.Taint}
			}
			l := kindapi.NewLabel(r.Labels, integ)
			tool.Responses = &l
		}
		for _, g := range gs {
			tool.Caps = append(tool.Caps, g.Name)
			g.Name = SessionCapName(t.Name, g.Name)
			grants = append(grants, g)
		}
		s.tools = append(s.tools, tool)
	}
	limits := p.Session.Limits()
	if limits.Timeout == 0 {
		limits.Timeout = 24 * time.Hour
	}
	if _, err := r.launch(ctx, kernel.TaskSpec{Module: sessionModule{end: s.end}, Principal: p.Session.Principal,
		Name: "session", Clearance: p.Session.Clearance, Limits: limits, Grants: grants}); err != nil {
		return nil, err
	}
	if !spec.Label.IsZero() {
		// Within the clearance (checked above): cannot fail.
		if err := r.task.Observe(spec.Label); err != nil {
			s.Kill()
			<-s.done
			return nil, err
		}
	}
	logger.Info("session started", "run", r.info.ID, "tools", len(s.tools), "client", spec.Client, "label", spec.Label.String())
	return s, nil
}

// toolLimits are the limits a tool's module is compiled under: the tool's,
// its static limits and compile memory where it sets none the session's.
func toolLimits(tool, session kernel.Limits) kernel.Limits {
	or := func(a, b int) int {
		if a == 0 {
			return b
		}
		return a
	}
	tool.Functions = or(tool.Functions, session.Functions)
	tool.Locals = or(tool.Locals, session.Locals)
	tool.Nesting = or(tool.Nesting, session.Nesting)
	tool.BrTableTargets = or(tool.BrTableTargets, session.BrTableTargets)
	tool.FunctionSize = or(tool.FunctionSize, session.FunctionSize)
	if tool.CompileMemory == 0 {
		tool.CompileMemory = session.CompileMemory
	}
	return tool
}
