package fakellm

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// DefaultModel is the one model a fake lists unless WithModels says
// otherwise.
const DefaultModel = "fake-model"

// DefaultMaxRequestBytes bounds a request body; a larger one is answered
// 413 (see WithMaxRequestBytes).
const DefaultMaxRequestBytes = 32 << 20

// created is every answer's "created" time, fixed so answers do not depend
// on the clock.
const created = 1700000000

// Server is a scripted fake of an OpenAI-compatible chat-completions
// server. Its methods may be called from any goroutine.
type Server struct {
	cfg  config
	ts   *httptest.Server // nil for NewHandler
	done chan struct{}    // closed by Close: releases every waiting handler
	once sync.Once

	active atomic.Int64 // handlers running

	mu    sync.Mutex
	reqs  []record // protected by mu
	next  int      // next script step; protected by mu
	stats Stats    // protected by mu
}

// record is one request as it arrived.
type record struct {
	method, path string
	header       http.Header
	body         []byte
	status       int
}

// config is what the options set; immutable once New returns.
type config struct {
	script      []Step
	responder   func(Request) Step
	key         string
	models      []string
	compromised bool
	secrets     []*regexp.Regexp
	violate     bool
	maxRequest  int64
}

// An Option configures a Server at construction.
type Option func(*config)

// WithScript appends steps to the script: each chat request the fake
// accepts consumes the next one. Requests it refuses itself (401, 400 for
// a malformed body or stream=true, 404, 405, 413) consume none.
func WithScript(steps ...Step) Option {
	return func(c *config) { c.script = append(c.script, steps...) }
}

// WithResponder computes the step for each request once the script is
// used up (at once, with no script). It may be called concurrently, from
// the handlers of concurrent requests.
func WithResponder(f func(Request) Step) Option {
	if f == nil {
		panic("fakellm.WithResponder: nil function")
	}
	return func(c *config) { c.responder = f }
}

// WithAPIKey makes every request need "Authorization: Bearer key"; others
// are answered 401. Without it any Authorization header, or none, is
// accepted.
func WithAPIKey(key string) Option {
	return func(c *config) { c.key = key }
}

// WithModels sets the models GET /v1/models lists. The first is the
// answer's model when a request names none; a request naming another
// model is answered anyway, with the model it named.
func WithModels(ids ...string) Option {
	if len(ids) == 0 {
		panic("fakellm.WithModels: no models")
	}
	return func(c *config) { c.models = slices.Clone(ids) }
}

// WithCompromised makes the model obey every instruction it finds in
// what it is shown (see the package doc).
func WithCompromised() Option {
	return func(c *config) { c.compromised = true }
}

// WithSecretPattern adds a pattern of what the compromised model takes for
// a secret and tries to exfiltrate, on top of the passport-like default
// (PassportPattern).
func WithSecretPattern(re *regexp.Regexp) Option {
	if re == nil {
		panic("fakellm.WithSecretPattern: nil regexp")
	}
	return func(c *config) { c.secrets = append(c.secrets, re) }
}

// WithSchemaViolation makes the compromised model's json_schema answers
// violate the schema, as SchemaViolation does, instead of fitting it.
func WithSchemaViolation() Option {
	return func(c *config) { c.violate = true }
}

// WithMaxRequestBytes bounds request bodies (default
// DefaultMaxRequestBytes).
func WithMaxRequestBytes(n int64) Option {
	if n < 1 {
		panic("fakellm.WithMaxRequestBytes: not positive")
	}
	return func(c *config) { c.maxRequest = n }
}

// passportPattern is what the compromised model always takes for a
// secret: one or two capital letters and six to nine digits, as passport
// numbers are.
var passportPattern = regexp.MustCompile(`\b[A-Z]{1,2}[0-9]{6,9}\b`)

// PassportPattern returns the default secret pattern,
// \b[A-Z]{1,2}[0-9]{6,9}\b.
func PassportPattern() *regexp.Regexp { return regexp.MustCompile(passportPattern.String()) }

func newServer(opts []Option) *Server {
	cfg := config{models: []string{DefaultModel}, maxRequest: DefaultMaxRequestBytes}
	for _, o := range opts {
		o(&cfg)
	}
	cfg.secrets = append([]*regexp.Regexp{passportPattern}, cfg.secrets...)
	s := &Server{cfg: cfg, done: make(chan struct{})}
	s.stats.StepsLeft = len(cfg.script)
	return s
}

// New starts a fake listening on 127.0.0.1 (a free port), as an
// httptest.Server. It panics if it cannot listen, as httptest does.
func New(opts ...Option) *Server {
	s := newServer(opts)
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("fakellm: listen on 127.0.0.1: %v", err))
	}
	s.ts = httptest.NewUnstartedServer(s.Handler())
	s.ts.Listener.Close()
	s.ts.Listener = l
	s.ts.Start()
	return s
}

// NewHandler returns a fake that listens nowhere: serve Handler on a
// listener of your own. URL is "". Close still releases hung requests.
func NewHandler(opts ...Option) *Server { return newServer(opts) }

// URL is the base URL, "http://127.0.0.1:PORT" with no trailing slash:
// chat requests go to URL()+ChatPath.
func (s *Server) URL() string {
	if s.ts == nil {
		return ""
	}
	return s.ts.URL
}

// Handler serves the fake's API.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// Close releases every waiting handler (a Hang, a Trickle, an After: their
// connections are aborted), then, for a fake from New, shuts the listener
// down and waits for the handlers to return. It may be called more than
// once.
func (s *Server) Close() {
	s.once.Do(func() { close(s.done) })
	if s.ts != nil {
		s.ts.Close()
	}
}

// Request is one request as the fake received it.
type Request struct {
	Seq    int // 1 for the first request, in order of arrival
	Method string
	Path   string
	Header http.Header
	Body   []byte       // as read (cut at the size bound)
	Chat   *ChatRequest // the decoded body of a chat request; nil if it did not decode
	Status int          // the status answered; 0 while none is written
}

// Shown is all the text the request showed the model: each message's role,
// content and tool calls, each tool definition, and the response schema.
// For a body that did not decode it is the body.
func (r Request) Shown() string {
	if r.Chat == nil {
		return string(r.Body)
	}
	var b strings.Builder
	for _, m := range r.Chat.Messages {
		fmt.Fprintf(&b, "%s: %s\n", m.Role, m.Text())
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&b, "  call %s %s\n", c.Function.Name, c.Function.Arguments)
		}
	}
	for _, t := range r.Chat.Tools {
		fmt.Fprintf(&b, "tool %s: %s %s\n", t.Function.Name, t.Function.Description, t.Function.Parameters)
	}
	if f := r.Chat.ResponseFormat; f != nil && f.JSONSchema != nil {
		fmt.Fprintf(&b, "schema %s: %s\n", f.JSONSchema.Name, f.JSONSchema.Schema)
	}
	return b.String()
}

// Requests returns every request so far, in order of arrival, as copies.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.reqs))
	for i := range s.reqs {
		out[i] = s.request(i)
	}
	return out
}

// request builds the Request of record i.
//
// Preconditions: s.mu is held.
func (s *Server) request(i int) Request {
	r := s.reqs[i]
	q := Request{
		Seq: i + 1, Method: r.method, Path: r.path, Header: r.header.Clone(),
		Body: slices.Clone(r.body), Status: r.status,
	}
	if r.path == ChatPath {
		var c ChatRequest
		if json.Unmarshal(r.body, &c) == nil {
			q.Chat = &c
		}
	}
	return q
}

// Saw reports whether any request so far contained substr, in its raw body
// or in what it showed the model (Request.Shown), so JSON escaping cannot
// hide it.
func (s *Server) Saw(substr string) bool {
	for _, r := range s.Requests() {
		if strings.Contains(string(r.Body), substr) || strings.Contains(r.Shown(), substr) {
			return true
		}
	}
	return false
}

// Stats counts what the fake has done.
type Stats struct {
	Requests  int // every request, any path
	Answers   int // chat requests answered by a step, misbehaviours included
	Refused   int // requests the fake refused itself (400, 401, 404, 405, 413, 500 for a used-up script)
	StepsUsed int // script steps consumed
	StepsLeft int // script steps not yet consumed

	// Token totals over the well-formed answers, as counted (what
	// WithUsage made an answer report does not count).
	PromptTokens, CompletionTokens int64

	Active int // handlers running now: a hung request counts until released
}

// Stats returns the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Active = int(s.active.Load())
	return st
}
