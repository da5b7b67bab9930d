package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/approvals"
	"github.com/mandatevm/mandate/internal/mcpclients"
	"github.com/mandatevm/mandate/internal/mcpserve"
	"github.com/mandatevm/mandate/internal/webui"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/manifest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const mcpHelp = `Usage: mandate mcp serve POLICY.hcl [--http ADDR] [--token-file FILE]
                         [--client NAME] [--var NAME=VALUE ...] [--approve MODE]
                         [--engine NAME] [--cache-dir DIR] [--state-dir DIR]
                         [--log-level LEVEL]
       mandate mcp client URL [--token-file FILE | --token TOKEN]
                          [--format text|json] [-- COMMAND ...]
       mandate mcp reset CLIENT --reason WHY [--state-dir DIR]

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
"Authorization: Bearer TOKEN" with a token of the file (never passed to a
tool). The server has no OAuth: a client refused for its token is told
so, and its OAuth discovery (/.well-known/...) finds nothing. A browser's
page of another origin may not post to it. "mandate mcp client URL" keeps
one session over several calls, to see its label at work from a shell.

The label is the client's, not the connection's: a model does not forget
what it read when a connection ends. Each session belongs to a client:
over HTTP the one its token names (the token file's lines are
"CLIENT TOKEN [PRINCIPAL]", a token of 16 characters or more; PRINCIPAL
pins the client to the one principal its sessions may act for, and a
server whose policy acts for another refuses them; a file of one bare token
is the client "default"; without --token-file every session is the client
"local"), over stdio --client NAME (default "stdio"). What any session
shows a client raises the client's label, kept in STATE/mcp-clients.db:
the client's other live sessions take it up at once, its next sessions
start at it, across restarts. It falls only when a person runs "mandate
mcp reset CLIENT --reason WHY" at a terminal (for sessions started after
it), or, with label_ttl in the policy's session block, when a session
starts that long after the label last rose.

Over HTTP, at most 32 sessions live at once (a new one past that is
answered a JSON-RPC error saying so), each ended after 10 minutes idle.
Each session is a run in the run store ("mandate runs", "mandate graph
RUN", one task per call; its module "mcp:CLIENT") and every decision goes
to the audit log. A session its client ends, or that times out idle, is
recorded as done.

Flags:

	--http ADDR        serve Streamable HTTP on ADDR instead of stdio
	--token-file FILE  the bearer tokens HTTP clients must send, and the
	                   clients they name: lines CLIENT TOKEN [PRINCIPAL]
	--client NAME      over stdio, the client the session belongs to
	                   (default "stdio"): 1 to 64 of A-Z a-z 0-9 _ . -
	--var NAME=VALUE   sets var.NAME in the policy; repeatable
	--approve MODE     who answers uses that need a person's yes
	                   (approve_when, approve_above):
	                   wait (default): the person, out of band, never the
	                     client: the call waits while the person answers on
	                     mandate ui's approvals page or with "mandate
	                     approvals yes|no ID" from a shell (10 minutes, then
	                     refused); a client that can show a URL-mode
	                     elicitation is shown the page's address, and its
	                     answer approves nothing (its decline refuses)
	                   no: denies every one; yes: approves every one
	                   A tool whose policy says approval = "client" is
	                   asked by the client's form instead (never a payment)
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

` + mcpClientHelp + "\n" + mcpResetHelp

func runMCP(e *env, args []string) int {
	c := lookupCommand("mcp")
	if len(args) > 0 && args[0] == "reset" {
		return runMCPReset(e, c, args[1:])
	}
	if len(args) > 0 && args[0] == "client" {
		return runMCPClient(e, c, args[1:])
	}
	if len(args) == 0 || args[0] != "serve" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			fmt.Fprint(e.stdout, c.help)
			return exitOK
		}
		return e.usageError(c, "the subcommands are serve, client and reset: mandate mcp serve POLICY.hcl; mandate mcp client URL; mandate mcp reset CLIENT --reason WHY")
	}
	fs := flagSet("mcp serve")
	vars := varFlag{}
	fs.Var(vars, "var", "")
	httpAddr := fs.String("http", "", "")
	tokenFile := fs.String("token-file", "", "")
	client := fs.String("client", "", "")
	approve := fs.String("approve", approveWait, "")
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
	o := mcpOptions{policy: path, vars: vars, http: *httpAddr, tokenFile: *tokenFile, approve: *approve, engine: *engine, client: *client}
	switch {
	case o.client != "" && o.http != "":
		return e.usageError(c, "--client names the client of a stdio session; over HTTP a client is named by its token (--token-file: lines CLIENT TOKEN)")
	case o.client == "":
		o.client = stdioClient
	case !validClientName(o.client):
		return e.usageError(c, "--client %q must be 1 to %d of the characters A-Z a-z 0-9 _ . -", kindapi.Printable(o.client), maxClientName)
	}
	if o.level = hclog.LevelFromString(*level); o.level == hclog.NoLevel {
		return e.usageError(c, "unknown log level %q", *level)
	}
	if o.approve == approvePrompt {
		return e.usageError(c, "--approve prompt: an MCP server has no terminal to ask on; use wait (the default), no or yes")
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
	policy, http, tokenFile, approve, engine, cache, state, client string
	vars                                                           varFlag
	level                                                          hclog.Level
}

// mcpServer is what every session of one "mandate mcp serve" shares: the
// host (its engine and compiled modules, the audit log, the run store)
// and the policy pinned on it. The sessions are the host's
// (host.StartSession); this file keeps the transports and the flags.
type mcpServer struct {
	e      *env
	o      mcpOptions
	h      *host.Host
	policy *host.Policy
	logger hclog.Logger
	// approvals are the state directory's pending approvals (--approve
	// wait): the person's answers.
	approvals *approvals.Store
	// clients are the state directory's MCP clients: their labels.
	clients *mcpclients.Store
	mu      sync.Mutex
	running sync.WaitGroup
	live    atomic.Int64         // sessions started, or about to (reserve), and not ended
	open    map[*mcpSession]bool // HTTP sessions not ended, to end at shutdown; protected by mu
	// byClient are the live sessions of each client; owner is the client
	// of each HTTP session, by its Mcp-Session-Id. Protected by mu.
	byClient map[string]map[*mcpSession]bool
	owner    map[string]string
}

// reserve counts a session about to start against maxMCPSessions; false
// when that many are live.
func (s *mcpServer) reserve() bool {
	for {
		n := s.live.Load()
		if n >= maxMCPSessions {
			return false
		}
		if s.live.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (e *env) serveMCP(ctx context.Context, o mcpOptions) error {
	p, err := manifest.LoadPolicy(o.policy, o.vars)
	if err != nil {
		return err
	}
	s := &mcpServer{e: e, o: o, logger: hclog.New(&hclog.LoggerOptions{Name: "mandate", Level: o.level, Output: e.stderr})}
	s.h, err = host.Open(ctx, host.Options{StateDir: o.state, CacheDir: o.cache, Engine: o.engine, Logger: s.logger})
	if err != nil {
		var oe *host.OpenError
		if errors.As(err, &oe) && oe.Log {
			return fmt.Errorf("%v\nno session starts on a log that cannot be trusted; inspect it with: mandate audit verify --state-dir %s", err, o.state)
		}
		return err
	}
	defer s.h.Close()
	if s.clients, err = mcpclients.Open(o.state); err != nil {
		return err
	}
	defer s.clients.Close()
	if o.approve == approveWait {
		if s.approvals, err = approvals.Open(o.state); err != nil {
			return err
		}
		defer s.approvals.Close()
	}
	if s.policy, err = s.h.PinPolicy(ctx, p); err != nil {
		return err
	}
	defer s.running.Wait()
	if o.http == "" {
		s.live.Add(1)
		sess, err := s.newSession(ctx, o.client, "", nil)
		if err != nil {
			s.live.Add(-1)
			return err
		}
		// The SDK's own bound on a frame counts the bytes its decoder
		// reads after the last frame ended, so a frame it had read
		// ahead of (sent on the heels of the one before) passes it by
		// that much: the exact bound is a line's length, kept here.
		// The input's end ends the session once what was asked is
		// answered (stdioDrain).
		drain := newStdioDrain(ctx, mcpIdleTimeout)
		err = sess.Server().Run(ctx, &mcp.IOTransport{
			Reader:        drain.reader(&lineLimitReader{r: os.Stdin, max: maxMCPRequest}),
			Writer:        drain.writer(nopWriteCloser{os.Stdout}),
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

// mcpSession is one client session: the host's session, served over MCP.
type mcpSession struct {
	*mcpserve.Session
	hs       *host.Session
	client   string
	id       string // its Mcp-Session-Id over HTTP
	endOnce  sync.Once
	finished chan struct{}
}

// newSession starts a session of client on the host: a run whose task
// holds every tool's capabilities and starts at the client's label (once
// label_ttl, when the policy sets one, is checked), its approvals asked
// of the person through the client (elicitation), else as --approve says.
// The caller has counted it in s.live (reserve); id is its Mcp-Session-Id
// over HTTP.
func (s *mcpServer) newSession(ctx context.Context, client, id string, initialized func(*mcp.ServerSession)) (*mcpSession, error) {
	if ttl := s.policy.Manifest().Session.LabelTTL; ttl > 0 {
		dropped, err := s.clients.Expire(ctx, client, ttl, time.Now())
		if err != nil {
			return nil, err
		}
		if !dropped.IsZero() {
			s.logger.Info("the client's label expired (label_ttl)", "client", client, "label", dropped.String(), "label_ttl", ttl)
		}
	}
	stored, err := s.clients.Label(ctx, client)
	if err != nil {
		return nil, err
	}
	var ap *mcpserve.Approvals
	var person *approvals.Approver
	if s.o.approve == approveWait {
		// The person, out of band: the call waits on the state
		// directory's pending approvals, and the client is shown where
		// the person answers.
		person = &approvals.Approver{Store: s.approvals, Waiter: "mandate mcp serve " + s.o.policy,
			Asked: func(ctx context.Context, a approvals.Approval) {
				where := "mandate approvals yes|no " + a.ID
				if u, ok := webui.ApprovalURL(s.o.state, a.ID); ok {
					where = u + " or " + where
				}
				s.logger.Warn("a call waits for the person's yes", "approval", a.ID, "run", a.Run,
					"asks", kindapi.Printable(a.Request.Summary), "answer", where)
				ap.Asked(ctx, a.ID, a.Request.Text())
			}}
		ap = mcpserve.NewApprovals(person)
		ap.URL = func(id string) (string, bool) { return webui.ApprovalURL(s.o.state, id) }
		ap.Decline = func(ctx context.Context, id, by string) error {
			_, err := s.approvals.Answer(ctx, id, kernel.Answer{Channel: kernel.ChannelClient, By: by}, "")
			return err
		}
	} else {
		fixed, err := newApprover(s.o.approve, s.e.stderr)
		if err != nil {
			return nil, err
		}
		ap = mcpserve.NewApprovals(fixed)
	}
	// A session ends when its client goes (endSession), recorded as done;
	// the server's shutdown ends every session that way too.
	hs, err := s.h.StartSession(context.WithoutCancel(ctx), host.SessionSpec{Policy: s.policy, Approver: ap, Logger: s.logger,
		Client: client, Label: stored.Label})
	if err != nil {
		return nil, err
	}
	if person != nil {
		person.Run = hs.ID()
	}
	var tools []*mcpserve.Tool
	for _, t := range hs.Tools() {
		tools = append(tools, &mcpserve.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema,
			ByReference: t.ByReference, Module: t.Module, Entry: t.Entry, Limits: t.Limits, Caps: t.Caps, ClientApproval: t.ClientApproval, Responses: t.Responses,
			Upstream: t.Upstream, Unavailable: t.Unavailable})
	}
	labels := &clientLabel{s: s, client: client}
	sess, err := mcpserve.NewSession(mcpserve.Config{Kernel: hs.Kernel(), Task: hs.Task(), Tools: tools, Logger: s.logger.Named("mcp"),
		Version: versionString(), Initialized: initialized, Approvals: ap, Labels: labels, SessionID: id, Effects: hs.Effects})
	if err != nil {
		hs.Kill()
		<-hs.Done()
		return nil, err
	}
	m := &mcpSession{Session: sess, hs: hs, client: client, id: id, finished: make(chan struct{})}
	labels.self = m
	s.running.Add(1)
	s.mu.Lock()
	if s.byClient == nil {
		s.byClient, s.owner = map[string]map[*mcpSession]bool{}, map[string]string{}
	}
	if s.byClient[client] == nil {
		s.byClient[client] = map[*mcpSession]bool{}
	}
	s.byClient[client][m] = true
	if id != "" {
		s.owner[id] = client
	}
	s.mu.Unlock()
	return m, nil
}

// endSession ends a session, a normal end (its client left, it was idle,
// or the server stops): its task returns, any call still running is
// killed, and the run is recorded as done with its graph.
func (s *mcpServer) endSession(m *mcpSession) {
	m.endOnce.Do(func() {
		m.hs.End()
		s.logger.Info("session ended", "run", m.hs.ID(), "client", m.client)
		close(m.finished)
		s.mu.Lock()
		delete(s.open, m) // nothing of an ended session stays reachable
		delete(s.byClient[m.client], m)
		if len(s.byClient[m.client]) == 0 {
			delete(s.byClient, m.client)
		}
		if m.id != "" {
			delete(s.owner, m.id)
		}
		s.mu.Unlock()
		s.live.Add(-1)
		s.running.Done()
	})
}

// serveHTTP serves Streamable HTTP: each client session its own session.
func (s *mcpServer) serveHTTP(ctx context.Context) error {
	host, _, err := net.SplitHostPort(s.o.http)
	if err != nil {
		return fmt.Errorf("--http %s: %v", s.o.http, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--http %s: serve on a loopback address (127.0.0.1:PORT): tools act for %s", s.o.http, s.policy.Manifest().Session.Principal)
	}
	var tokens []clientToken
	if s.o.tokenFile != "" {
		b, err := os.ReadFile(s.o.tokenFile)
		if err != nil {
			return fmt.Errorf("--token-file: %v", err)
		}
		if tokens, err = parseTokenFile(b); err != nil {
			return fmt.Errorf("--token-file %s: %v", s.o.tokenFile, err)
		}
		if len(tokens) == 1 && tokens[0].short {
			s.logger.Warn("the token file's one bare token is shorter than 16 characters: a guessable token is anyone's session",
				"file", s.o.tokenFile)
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
		return probe
	}, &mcp.StreamableHTTPOptions{SessionTimeout: mcpIdleTimeout, MaxRequestBodyBytes: maxMCPRequest})
	// An initialize starts its session here, before the SDK sees it, so
	// that a refusal (the session limit, a client's label above the
	// clearance) reaches the client as a JSON-RPC error saying why: the
	// SDK answers a nil server with a bare HTTP 400.
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
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
				}
				slot.initialize = json.Unmarshal(body, &m) == nil && m.Method == "initialize"
				r.Body = io.NopCloser(bytes.NewReader(body))
				if slot.initialize {
					client, _ := r.Context().Value(clientKey{}).(string)
					if p := pinned(tokens, client); p != "" && p != s.policy.Manifest().Session.Principal {
						s.logger.Warn("refusing a session: the client is pinned to another principal", "client", client,
							"pinned", p, "policy", s.policy.Manifest().Session.Principal)
						writeRPCError(w, m.ID, fmt.Sprintf("client %s may act only for %s, and this server's policy acts for %s",
							client, kindapi.Printable(p), kindapi.Printable(s.policy.Manifest().Session.Principal)))
						return
					}
					sess, err := s.startHTTPSession(ctx, client)
					if err != nil {
						writeRPCError(w, m.ID, err.Error())
						return
					}
					slot.sess = sess
					defer func() {
						if w.Header().Get("Mcp-Session-Id") != sess.id {
							// The SDK did not take the session (it refused
							// the request): nothing else will end it.
							s.endSession(sess)
							return
						}
						// It ends when the SDK's session does: the client
						// ended it (DELETE), or it was idle past
						// mcpIdleTimeout, initialized or not.
						for ss := range sess.Server().Sessions() {
							go func() { ss.Wait(); s.endSession(sess) }()
						}
					}()
				}
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionMemo{}, slot)))
		})
	}
	inner := memoize(handler)
	// Every request names its client: by its token, or "local" without a
	// token file; a session answers only its own client.
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if noOAuth(w, r) {
			return
		}
		client := localClient
		if tokens != nil {
			var ok bool
			if client, ok = clientOf(tokens, r); !ok {
				unauthorized(w, r)
				return
			}
		}
		r.Header.Del("Authorization") // never passed on
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			s.mu.Lock()
			owner, known := s.owner[id]
			s.mu.Unlock()
			if known && owner != client {
				s.logger.Warn("a client used another client's session: refused", "client", client, "owner", owner)
				http.Error(w, "session not found", http.StatusNotFound)
				return
			}
		}
		inner.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), clientKey{}, client)))
	})
	ln, err := net.Listen("tcp", s.o.http)
	if err != nil {
		return err
	}
	// A browser's page of another origin may not post to the server
	// (the clients of others, Node or Go, send no Origin and pass).
	srv := &http.Server{Handler: http.NewCrossOriginProtection().Handler(h), ReadHeaderTimeout: 10 * time.Second}
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

// startHTTPSession starts a session of client for an initialize request,
// within maxMCPSessions; its error is what the client is told.
func (s *mcpServer) startHTTPSession(ctx context.Context, client string) (*mcpSession, error) {
	if !s.reserve() {
		s.logger.Warn("refusing a new session: too many live sessions", "client", client, "max", maxMCPSessions)
		return nil, errTooManySessions
	}
	s.logger.Debug("new MCP session", "client", client)
	sess, err := s.newSession(ctx, client, rand.Text(), nil)
	if err != nil {
		s.live.Add(-1)
		s.logger.Error("starting a session", "client", client, "error", err)
		return nil, fmt.Errorf("the session could not start: %v", err)
	}
	s.mu.Lock()
	if s.open == nil {
		s.open = map[*mcpSession]bool{}
	}
	s.open[sess] = true
	s.mu.Unlock()
	return sess, nil
}

// errTooManySessions answers an initialize past maxMCPSessions.
var errTooManySessions = fmt.Errorf("too many sessions: at most %d live at once; end one or wait for an idle one to time out after %v",
	maxMCPSessions, mcpIdleTimeout)

// rpcServerError is the JSON-RPC code of a refused initialize (the
// implementation-defined server errors are -32000 to -32099).
const rpcServerError = -32000

// writeRPCError answers a request (id) with a JSON-RPC error: HTTP 200,
// for clients to read the message (many show only the status of another).
func writeRPCError(w http.ResponseWriter, id json.RawMessage, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": rpcServerError, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(b)
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

// Bounds on HTTP sessions: each holds a kernel and its tasks (the engine
// and the compiled tools are the host's, shared by every session), so a
// client that initializes and never ends its session costs that until the
// idle timeout; past maxMCPSessions live, new ones are refused.
const (
	maxMCPSessions = 32
	mcpIdleTimeout = 10 * time.Minute
)
