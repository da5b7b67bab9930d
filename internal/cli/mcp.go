package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/constraint"
	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/mcpserve"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/manifest"
	"github.com/mandatevm/mandate/runstore"
	"github.com/mandatevm/mandate/sandbox"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const mcpHelp = `Usage: mandate mcp serve POLICY.hcl [--http ADDR] [--token-file FILE]
                         [--var NAME=VALUE ...] [--approve MODE] [--engine NAME]
                         [--cache-dir DIR] [--state-dir DIR] [--log-level LEVEL]

Serves the tools a policy file names over the Model Context Protocol, each
tools/call a fresh Mandate task holding exactly its tool's capabilities.
A client's connection is a session: a task whose label rises with what
the client is shown, so once its model has read a labelled result, the
tools whose sinks may not receive it are refused (EFLOW) and listed as
unavailable. Nothing a client sends changes what a tool may do; tool
modules are read and pinned when the server starts, and the descriptions
come from the policy.

Over stdio by default (the client starts "mandate mcp serve"; logs go to
stderr). With --http ADDR, over Streamable HTTP at ADDR (a loopback
address: 127.0.0.1:PORT; DNS-rebinding protection is on), each client
session its own session task; --token-file FILE requires
"Authorization: Bearer TOKEN" with the file's token (never passed to a
tool).

Over HTTP, at most 32 sessions live at once, each ended after 10 minutes
idle. Each session is a run in the run store ("mandate runs", "mandate graph
RUN", one task per call) and every decision goes to the audit log.

Flags:

	--http ADDR        serve Streamable HTTP on ADDR instead of stdio
	--token-file FILE  the bearer token HTTP clients must send
	--var NAME=VALUE   sets var.NAME in the policy; repeatable
	--approve MODE     uses that need a person's yes (approve_when,
	                   approve_above) are asked of the person through the
	                   client (MCP elicitation), showing what the kernel
	                   will do; a client that cannot ask gets this: no
	                   (default) denies, yes approves
	--engine, --cache-dir, --state-dir, --log-level: as for mandate run

A policy (the grammar of "go doc github.com/mandatevm/mandate/manifest"):

` + "" + `	session {
	  principal = "alice"
	  clearance = ["pii:alice"]
	}
	tool "my_benefits" {
	  module      = "tools/benefits"
	  description = "Your own benefits record"
	  cap "data" "benefits" { collection = "benefits", records = "own" }
	}
`

func runMCP(e *env, args []string) int {
	c := lookupCommand("mcp")
	if len(args) == 0 || args[0] != "serve" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			fmt.Fprint(e.stdout, c.help)
			return exitOK
		}
		return e.usageError(c, "the subcommand is serve: mandate mcp serve POLICY.hcl")
	}
	fs := flagSet("mcp serve")
	vars := varFlag{}
	fs.Var(vars, "var", "")
	httpAddr := fs.String("http", "", "")
	tokenFile := fs.String("token-file", "", "")
	approve := fs.String("approve", approveNo, "")
	engine := fs.String("engine", "", "")
	cacheFlag := fs.String("cache-dir", "", "")
	stateFlag := stateDirFlag(fs)
	level := fs.String("log-level", "info", "")
	pos, code, ok := e.parse(c, fs, args[1:])
	if !ok {
		return code
	}
	path, code, ok := e.oneArg(c, pos, "the policy")
	if !ok {
		return code
	}
	o := mcpOptions{policy: path, vars: vars, http: *httpAddr, tokenFile: *tokenFile, approve: *approve, engine: *engine}
	if o.level = hclog.LevelFromString(*level); o.level == hclog.NoLevel {
		return e.usageError(c, "unknown log level %q", *level)
	}
	if o.approve == approvePrompt {
		return e.usageError(c, "--approve prompt: an MCP server has no terminal to ask on; use no or yes")
	}
	if o.engine, o.cache, o.state, code, ok = e.runDirs(c, o.engine, *cacheFlag, *stateFlag); !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(e.context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := e.serveMCP(ctx, o); err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	return exitOK
}

type mcpOptions struct {
	policy, http, tokenFile, approve, engine, cache, state string
	vars                                                   varFlag
	level                                                  hclog.Level
}

// mcpServer is what every session of one "mandate mcp serve" shares: the
// policy, the tools' modules read and pinned at start, the audit log and
// the run store.
type mcpServer struct {
	e       *env
	o       mcpOptions
	policy  *manifest.Policy
	wasm    map[string][]byte // by tool name
	logger  hclog.Logger
	alog    *audit.Log
	store   *runstore.Store
	mu      sync.Mutex
	running sync.WaitGroup
	live    atomic.Int64         // sessions started and not ended
	open    map[*mcpSession]bool // HTTP sessions not ended, to end at shutdown; protected by mu
}

func (e *env) serveMCP(ctx context.Context, o mcpOptions) error {
	p, err := manifest.LoadPolicy(o.policy, o.vars)
	if err != nil {
		return err
	}
	s := &mcpServer{e: e, o: o, policy: p, wasm: map[string][]byte{},
		logger: hclog.New(&hclog.LoggerOptions{Name: "mandate", Level: o.level, Output: e.stderr})}
	for _, t := range p.Tools {
		var wasm []byte
		if t.ModuleIsDir {
			wasm, err = host.BuildGuest(ctx, t.ModulePath, false, o.cache)
		} else {
			wasm, err = os.ReadFile(t.ModulePath)
		}
		if err != nil {
			return t.ModuleError(err)
		}
		if err := t.CheckDigest(sandbox.Digest(wasm)); err != nil {
			return err
		}
		s.wasm[t.Name] = wasm // pinned: never read again
		s.logger.Info("tool pinned", "tool", t.Name, "digest", sandbox.Digest(wasm))
	}
	if err := os.MkdirAll(o.state, 0o700); err != nil {
		return fmt.Errorf("state dir: %v", err)
	}
	if s.alog, err = audit.Open(auditPath(o.state)); err != nil {
		return err
	}
	defer s.alog.Close()
	if err := s.alog.CheckHead(ctx); err != nil {
		return fmt.Errorf("%v\nno session starts on a log that cannot be trusted; inspect it with: mandate audit verify --state-dir %s", err, o.state)
	}
	if s.store, err = openStore(o.state); err != nil {
		return err
	}
	defer s.store.Close()
	if err := s.store.Check(ctx); err != nil {
		return err
	}
	if err := host.Seed(ctx, p.Session.Seeds, o.state); err != nil {
		return err
	}
	defer s.running.Wait()
	if o.http == "" {
		sess, err := s.newSession(ctx, nil)
		if err != nil {
			return err
		}
		// The SDK's own bound on a frame counts the bytes its decoder
		// reads after the last frame ended, so a frame it had read
		// ahead of (sent on the heels of the one before) passes it by
		// that much: the exact bound is a line's length, kept here.
		err = sess.Server().Run(ctx, &mcp.IOTransport{
			Reader:        &lineLimitReader{r: os.Stdin, max: maxMCPRequest},
			Writer:        nopWriteCloser{os.Stdout},
			MaxLineLength: -1,
		})
		s.endSession(sess)
		if err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
			return err
		}
		return nil
	}
	return s.serveHTTP(ctx)
}

// mcpSession is one client session and what records it.
type mcpSession struct {
	*mcpserve.Session
	run      RunInfo
	k        *kernel.Kernel
	auditor  *host.Auditor
	snap     *snapshotter
	close    func()
	endOnce  sync.Once
	finished chan struct{}
}

// newSession starts a session: its own engine and kernel, the tools'
// modules compiled from the pinned bytes, the session task holding every
// tool's capabilities, and the run recorded as started.
func (s *mcpServer) newSession(ctx context.Context, initialized func(*mcp.ServerSession)) (*mcpSession, error) {
	o, p := s.o, s.policy
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (*mcpSession, error) { closeAll(); return nil, err }
	eng, err := host.NewEngine(ctx, o.engine, filepath.Join(o.cache, o.engine))
	if err != nil {
		return fail(fmt.Errorf("engine %s: %v", o.engine, err))
	}
	closers = append(closers, func() { eng.Close(context.Background()) })
	fallback, err := newApprover(o.approve, s.e.stderr)
	if err != nil {
		return fail(err)
	}
	// Approvals go to the person through the client once the session
	// exists (elicitation), else --approve decides.
	approver := &lateApprover{a: fallback}
	started := time.Now()
	runID := newRunID(started)
	abs, _ := filepath.Abs(o.policy)
	auditor := host.NewAuditor(s.alog.ForRun(runID), s.logger.Named("audit"))
	ks, closeKinds := host.Kinds(o.state)
	closers = append(closers, func() { closeKinds() })
	k, err := kernel.New(kernel.Config{Engine: eng, Kinds: ks, Logger: s.logger, Approver: approver,
		Constraints: constraint.New(), Auditor: auditor, Declassifiers: host.Declassifiers})
	if err != nil {
		return fail(err)
	}
	var tools []*mcpserve.Tool
	var grants []kernel.GrantSpec
	compiled := map[string]sandbox.Module{} // by digest: tools sharing a module compile it once
	for _, t := range p.Tools {
		wasm := s.wasm[t.Name]
		// Pinned at start: a module file changed since is not reloaded.
		if !t.ModuleIsDir {
			if now, err := os.ReadFile(t.ModulePath); err != nil || sandbox.Digest(now) != sandbox.Digest(wasm) {
				s.logger.Warn("a tool's module file changed since the server started; serving the module pinned then (restart to load another)",
					"tool", t.Name, "pinned", sandbox.Digest(wasm))
			}
		}
		mod, ok := compiled[sandbox.Digest(wasm)]
		if !ok {
			if mod, err = eng.Compile(ctx, wasm); err != nil {
				return fail(t.ModuleError(err))
			}
			compiled[sandbox.Digest(wasm)] = mod
			closers = append(closers, func() { mod.Close(context.Background()) })
		}
		gs, err := t.Grants(k)
		if err != nil {
			return fail(err)
		}
		tool := &mcpserve.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema,
			ByReference: t.Result == manifest.ResultReference, Module: mod, Entry: t.Entry, Limits: t.Limits()}
		for _, g := range gs {
			tool.Caps = append(tool.Caps, g.Name)
			g.Name = mcpserve.SessionCapName(t.Name, g.Name)
			grants = append(grants, g)
		}
		tools = append(tools, tool)
	}
	run := RunInfo{ID: runID, Manifest: abs, Task: "mcp-session", Module: "mcp", Digest: sandbox.IdleModule{}.Digest(),
		Principal: p.Session.Principal, Engine: o.engine, Started: started.UTC()}
	if err := s.store.Begin(ctx, run); err != nil {
		return fail(err)
	}
	limits := p.Session.Limits()
	if limits.Timeout == 0 {
		limits.Timeout = 24 * time.Hour
	}
	task, err := k.Start(context.Background(), kernel.TaskSpec{Module: sandbox.IdleModule{}, Principal: p.Session.Principal,
		Name: "session", Clearance: p.Session.Clearance, Limits: limits, Grants: grants})
	if err != nil {
		s.finish(run, nil, nil, runstore.StateRefused, err)
		return fail(err)
	}
	// The session so far is recorded at most once a second, after the
	// calls that ended: rewriting the record after every call cost most of
	// a call's time in a long session.
	snap := &snapshotter{every: time.Second, write: func() { s.snapshot(run, k, auditor) }}
	sess, err := mcpserve.NewSession(mcpserve.Config{Kernel: k, Task: task, Tools: tools, Logger: s.logger.Named("mcp"),
		Version: versionString(), Initialized: initialized,
		Called: snap.called})
	if err != nil {
		task.Kill()
		<-task.Done()
		s.finish(run, k, auditor, runstore.StateRefused, err)
		return fail(err)
	}
	approver.set(sess.Approver(fallback))
	s.running.Add(1)
	s.live.Add(1)
	s.logger.Info("session started", "run", runID, "tools", len(tools))
	return &mcpSession{Session: sess, run: run, k: k, auditor: auditor, snap: snap, close: closeAll, finished: make(chan struct{})}, nil
}

// endSession ends a session: its task (and any call still running) is
// killed, and the run recorded with its graph.
func (s *mcpServer) endSession(m *mcpSession) {
	m.endOnce.Do(func() {
		t := m.Task()
		t.Kill()
		<-t.Done()
		m.snap.stop() // no record of the session so far lands after its end
		s.finish(m.run, m.k, m.auditor, string(kernel.TaskDone), nil)
		m.close()
		s.logger.Info("session ended", "run", m.run.ID)
		close(m.finished)
		s.mu.Lock()
		delete(s.open, m) // nothing of an ended session stays reachable
		s.mu.Unlock()
		s.live.Add(-1)
		s.running.Done()
	})
}

// snapshot records a running session so far, so "mandate graph" shows it
// live; then the kernel forgets the calls recorded that ended (their
// tasks and capabilities): a session serving calls for days does not grow.
func (s *mcpServer) snapshot(run RunInfo, k *kernel.Kernel, a *host.Auditor) {
	var ended []*kernel.Task
	for _, t := range k.Tasks() {
		if t.Parent() != nil && t.Ended() {
			ended = append(ended, t) // ended before the record is read: in it
		}
	}
	rec := s.record(run, k, a)
	if err := s.store.Snapshot(context.Background(), rec); err != nil {
		s.logger.Warn("recording the session so far", "run", run.ID, "error", err)
		return
	}
	forgot := 0
	for _, t := range ended {
		if err := k.Forget(t); err != nil {
			s.logger.Warn("forget", "task", t.ID(), "error", err)
			continue
		}
		forgot++
	}
	if forgot > 0 {
		s.logger.Debug("calls recorded and forgotten", "run", run.ID, "calls", forgot, "kept", len(k.Tasks()))
	}
}

// record is a session's run as recorded now.
func (s *mcpServer) record(run RunInfo, k *kernel.Kernel, a *host.Auditor) Record {
	rec := Record{Version: runstore.RecordVersion, Run: run, Graph: kernel.Graph{Tasks: []kernel.GraphTask{}, Caps: []kernel.GraphCap{}}}
	if k != nil {
		rec.Graph = k.Graph()
		rec.Outputs = host.TaskOutputs(k)
	}
	if a != nil {
		rec.Denials, rec.Flows, rec.DenialsDropped, rec.FlowsDropped = a.Kept()
	}
	return rec
}

// finish records how a session's run ended.
func (s *mcpServer) finish(run RunInfo, k *kernel.Kernel, a *host.Auditor, state string, err error) {
	run.Ended, run.State = time.Now().UTC(), state
	if err != nil {
		run.Error, run.Exit = err.Error(), exitUsage
	}
	rec := s.record(run, k, a)
	rec.Run = run
	if err := s.store.Finish(context.Background(), rec); err != nil {
		s.logger.Error("recording the session", "run", run.ID, "error", err)
	}
}

// serveHTTP serves Streamable HTTP: each client session its own session.
func (s *mcpServer) serveHTTP(ctx context.Context) error {
	host, _, err := net.SplitHostPort(s.o.http)
	if err != nil {
		return fmt.Errorf("--http %s: %v", s.o.http, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--http %s: serve on a loopback address (127.0.0.1:PORT): tools act for %s", s.o.http, s.policy.Session.Principal)
	}
	var token string
	if s.o.tokenFile != "" {
		b, err := os.ReadFile(s.o.tokenFile)
		if err != nil {
			return fmt.Errorf("--token-file: %v", err)
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return fmt.Errorf("--token-file %s is empty", s.o.tokenFile)
		}
	}
	// The SDK asks for a server on every request (to learn its protocol
	// versions, and for a new session's first request twice): a request
	// of an existing session gets a server with no tools that serves
	// nothing, and one request's asks are answered with one session.
	probe := mcp.NewServer(&mcp.Implementation{Name: "mandate", Version: versionString()}, nil)
	handler := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if r.Header.Get("Mcp-Session-Id") != "" {
			return probe
		}
		memo, _ := r.Context().Value(sessionMemo{}).(*sessionSlot)
		if memo == nil || !memo.initialize {
			return probe // only an initialize request starts a session
		}
		memo.mu.Lock()
		defer memo.mu.Unlock()
		if memo.sess != nil {
			return memo.sess.Server()
		}
		if n := s.live.Load(); n >= maxMCPSessions {
			s.logger.Warn("refusing a new session: too many live sessions", "live", n, "max", maxMCPSessions)
			return nil
		}
		s.logger.Debug("new MCP session", "method", r.Method, "proto", r.Header.Get("Mcp-Protocol-Version"))
		var sess *mcpSession
		sess, err := s.newSession(ctx, func(ss *mcp.ServerSession) {
			go func() { ss.Wait(); s.endSession(sess) }()
		})
		if err != nil {
			s.logger.Error("starting a session", "error", err)
			return nil
		}
		memo.sess = sess
		s.mu.Lock()
		if s.open == nil {
			s.open = map[*mcpSession]bool{}
		}
		s.open[sess] = true
		s.mu.Unlock()
		return sess.Server()
	}, &mcp.StreamableHTTPOptions{SessionTimeout: mcpIdleTimeout, MaxRequestBodyBytes: maxMCPRequest})
	memoize := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			slot := &sessionSlot{}
			if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" && r.Body != nil {
				body, err := io.ReadAll(io.LimitReader(r.Body, maxMCPRequest+1))
				r.Body.Close()
				if err != nil || len(body) > maxMCPRequest {
					http.Error(w, "request too large", http.StatusRequestEntityTooLarge)
					return
				}
				var m struct {
					Method string `json:"method"`
				}
				slot.initialize = json.Unmarshal(body, &m) == nil && m.Method == "initialize"
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionMemo{}, slot)))
		})
	}
	h := memoize(handler)
	if token != "" {
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+token {
				w.Header().Set("WWW-Authenticate", "Bearer")
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			r.Header.Del("Authorization") // never passed on
			inner.ServeHTTP(w, r)
		})
	}
	ln, err := net.Listen("tcp", s.o.http)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(s.e.stderr, "mandate: serving MCP at http://%s/\n", ln.Addr())
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shut)
	}()
	err = srv.Serve(ln)
	s.mu.Lock()
	open := make([]*mcpSession, 0, len(s.open))
	for sess := range s.open {
		open = append(open, sess)
	}
	s.mu.Unlock()
	for _, sess := range open {
		s.endSession(sess)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// sessionMemo keys the request's sessionSlot.
type sessionMemo struct{}

// sessionSlot is the session one HTTP request started, if any.
type sessionSlot struct {
	initialize bool // the request is an initialize: it may start a session
	mu         sync.Mutex
	sess       *mcpSession
}

// maxMCPRequest bounds an HTTP request's body and a line on stdio.
const maxMCPRequest = 16 << 20

// errLineTooLong ends a stdio session whose client sent a line past
// maxMCPRequest.
var errLineTooLong = fmt.Errorf("a JSON-RPC line longer than %d bytes", maxMCPRequest)

// lineLimitReader passes on at most max bytes of any one line (the bytes
// between two newlines, wherever reads split them), then fails.
type lineLimitReader struct {
	r    io.ReadCloser
	max  int
	line int // bytes of the current line passed on
}

func (l *lineLimitReader) Read(p []byte) (int, error) {
	if l.line > l.max {
		return 0, errLineTooLong
	}
	n, err := l.r.Read(p)
	for i, b := range p[:n] {
		if b == '\n' {
			l.line = 0
			continue
		}
		if l.line++; l.line > l.max {
			return i, errLineTooLong
		}
	}
	return n, err
}

func (l *lineLimitReader) Close() error { return l.r.Close() }

// nopWriteCloser leaves stdout open when a session ends.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// Bounds on HTTP sessions: each holds an engine and its compiled tools
// (about 20 MB), so a client that initializes and never ends its session
// costs that until the idle timeout; past maxMCPSessions live, new ones are
// refused.
const (
	maxMCPSessions = 32
	mcpIdleTimeout = 10 * time.Minute
)

// lateApprover is an Approver set after the kernel that uses it is made.
type lateApprover struct {
	mu sync.Mutex
	a  kernel.Approver
}

func (l *lateApprover) set(a kernel.Approver) { l.mu.Lock(); l.a = a; l.mu.Unlock() }

func (l *lateApprover) Approve(ctx context.Context, r kernel.ApprovalRequest) (bool, error) {
	l.mu.Lock()
	a := l.a
	l.mu.Unlock()
	return a.Approve(ctx, r)
}

// snapshotter writes a session's record after calls, at most once per
// every: a call that ends within every of the last write schedules one
// write at the end of the interval.
type snapshotter struct {
	every time.Duration
	write func()

	writing sync.WaitGroup
	mu      sync.Mutex
	last    time.Time   // protected by mu
	pending *time.Timer // protected by mu
	stopped bool        // protected by mu
}

func (s *snapshotter) called() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.pending != nil {
		return
	}
	wait := s.every - time.Since(s.last)
	if wait < 0 {
		wait = 0
	}
	s.writing.Add(1)
	s.pending = time.AfterFunc(wait, func() {
		defer s.writing.Done()
		s.mu.Lock()
		s.pending, s.last = nil, time.Now()
		stopped := s.stopped
		s.mu.Unlock()
		if !stopped {
			s.write()
		}
	})
}

// stop cancels a pending write and waits for one being written: the
// session's end is recorded after, never before, its last snapshot.
func (s *snapshotter) stop() {
	s.mu.Lock()
	s.stopped = true
	if s.pending != nil && s.pending.Stop() {
		s.writing.Done() // its function will not run
		s.pending = nil
	}
	s.mu.Unlock()
	s.writing.Wait()
}
