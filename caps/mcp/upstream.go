package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Upstream connections. The kind keeps one connection (and, for a
// command, one process) per server identity (Scope.key: the url and its
// headers, or the command, its environment and directory), shared by
// every scope of that server. It connects on the first effect that needs
// it, never in Prepare; a connection that failed or a process that died
// is dropped, and the next effect connects again, up to maxFailures times
// in a row.

// maxFailures bounds the consecutive failed connections (or connections
// lost) of one server before the kind stops starting it.
const maxFailures = 5

// frameSlack is what the connection reads of one message beyond the
// grant's max_response_bytes: the JSON-RPC envelope.
const frameSlack = 64 << 10

// Stderr of a stdio server: each line cut to maxStderrLine bytes, at most
// maxStderrLines lines logged per process.
const (
	maxStderrLine  = 512
	maxStderrLines = 1000
)

// upstream is one server's connection.
type upstream struct {
	k    *Kind
	s    *Scope // the scope that made it: the server's parameters
	log  hclog.Logger
	mu   sync.Mutex // guards everything below but defs' content
	sess *sdk.ClientSession
	proc *process
	// failures counts connections that failed or were lost since the
	// last call that went through.
	failures int
	closed   bool

	listMu sync.Mutex // one tools/list at a time
	defsMu sync.Mutex // guards defs, never held across a request
	defs   map[string]toolDef
	stale  atomic.Bool // the server said its tools changed, or it reconnected
}

// toolDef is one tool as the server last listed it.
type toolDef struct {
	canon  []byte
	digest string
}

// upstreamFor returns the connection of s's server, made (unconnected)
// if there is none.
func (k *Kind) upstreamFor(s *Scope) (*upstream, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil, kindapi.NotPerformed(kindapi.Errorf(abi.EIO, "mcp: the kind is closed"))
	}
	u := k.ups[s.key]
	if u == nil {
		u = &upstream{k: k, s: s, log: k.log.Named("mcp").With("upstream", s.identity)}
		u.stale.Store(true)
		k.ups[s.key] = u
	}
	return u, nil
}

// known returns s's server's connection if there is one, without making
// it (Prepare may look, never act).
func (k *Kind) known(s *Scope) *upstream {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ups[s.key]
}

// cachedDef returns the tool's definition as last listed, when the list
// is current.
func (u *upstream) cachedDef(name string) (toolDef, bool, bool) {
	if u == nil || u.stale.Load() {
		return toolDef{}, false, false
	}
	u.defsMu.Lock()
	defer u.defsMu.Unlock()
	if u.defs == nil {
		return toolDef{}, false, false
	}
	d, ok := u.defs[name]
	return d, ok, true
}

// session returns a live session, connecting (and starting the process)
// when there is none.
func (u *upstream) session(ctx context.Context, what string) (*sdk.ClientSession, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil, kindapi.NotPerformed(kindapi.Errorf(abi.EIO, "%s: the kind is closed", what))
	}
	if u.sess != nil {
		return u.sess, nil
	}
	if u.failures >= maxFailures {
		return nil, kindapi.NotPerformed(kindapi.Errorf(abi.EIO, "%s: the server %s failed %d times in a row; it is not started again until mandate restarts",
			what, u.s.identity, u.failures))
	}
	cctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(u.k.done, cancel) // Close does not wait for a handshake
	sess, proc, err := u.connect(cctx)
	stop()
	cancel()
	if err != nil {
		u.failures++
		if ctx.Err() != nil {
			return nil, kindapi.NotPerformed(kindapi.Errorf(abi.ETIMEDOUT, "%s: the server %s did not answer the handshake in time", what, u.s.identity))
		}
		return nil, kindapi.NotPerformed(kindapi.Errorf(abi.EIO, "%s: connecting to the server %s: %s", what, u.s.identity, u.redact(err.Error())))
	}
	u.sess, u.proc = sess, proc
	u.stale.Store(true) // a new connection lists its tools again
	go func() {
		_ = sess.Wait()
		u.mu.Lock()
		lost := u.sess == sess
		if lost {
			u.sess, u.proc = nil, nil
			u.failures++
		}
		failures := u.failures
		u.mu.Unlock()
		if proc != nil {
			proc.kill()
		}
		if lost {
			u.log.Warn("mcp: the connection to the server ended", "failures", failures)
		}
	}()
	return sess, nil
}

// ok records a call that went through: the failures are forgotten.
func (u *upstream) ok() {
	u.mu.Lock()
	u.failures = 0
	u.mu.Unlock()
}

// drop ends sess after a failure of its transport, so the next call
// connects again.
func (u *upstream) drop(sess *sdk.ClientSession) {
	u.mu.Lock()
	var proc *process
	if u.sess == sess {
		u.sess, proc = nil, u.proc
		u.proc = nil
		u.failures++
	}
	u.mu.Unlock()
	_ = sess.Close()
	if proc != nil {
		proc.kill()
	}
}

// close ends the connection and the process, for good.
func (u *upstream) close() {
	u.mu.Lock()
	u.closed = true
	sess, proc := u.sess, u.proc
	u.sess, u.proc = nil, nil
	u.mu.Unlock()
	if proc != nil {
		proc.kill() // first: closing a session waits for a stdio server to exit
	}
	if sess != nil {
		_ = sess.Close()
	}
}

// connect makes a session to the server.
func (u *upstream) connect(ctx context.Context) (*sdk.ClientSession, *process, error) {
	client := sdk.NewClient(&sdk.Implementation{Name: "mandate", Version: abi.SDKVersion}, &sdk.ClientOptions{
		Capabilities:           &sdk.ClientCapabilities{}, // no roots, sampling or elicitation: the server gets nothing back
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { u.stale.Store(true) },
		MultiRoundTrip:         &sdk.MultiRoundTripOptions{Disabled: true},
	})
	bound := int(u.s.frameBound + frameSlack)
	if u.s.url != "" {
		t := &sdk.StreamableClientTransport{Endpoint: u.s.url, HTTPClient: u.httpClient(bound), MaxEventSize: bound, MaxRetries: 2}
		sess, err := client.Connect(ctx, t, nil)
		return sess, nil, err
	}
	p, err := u.start()
	if err != nil {
		return nil, nil, err
	}
	t := &sdk.IOTransport{Reader: p.stdout, Writer: p.stdin, MaxLineLength: bound}
	sess, err := client.Connect(ctx, t, nil)
	if err != nil {
		p.kill()
		return nil, nil, err
	}
	return sess, p, nil
}

// redact removes every secret of the scope from msg.
func (u *upstream) redact(msg string) string {
	for _, h := range u.s.headers {
		for _, v := range []string{h.value.Value(), h.probe.Value()} {
			if v != "" {
				msg = strings.ReplaceAll(msg, v, "[redacted]")
			}
		}
	}
	for _, e := range u.s.env {
		if v := e.value.Value(); len(v) >= minProbeLen {
			msg = strings.ReplaceAll(msg, v, "[redacted]")
		}
	}
	return kindapi.Printable(msg)
}

// echoes reports whether the JSON document b holds one of the headers'
// secrets as a task reading it would see it: in its bytes, in a string
// or member name once decoded (JSON escapes '"', '\\', and '&', '<', '>'
// in some writers), or in a string's base64 decoding (an image's or a
// resource blob's data).
func (u *upstream) echoes(b []byte) bool {
	var probes [][]byte
	for _, h := range u.s.headers {
		if v := h.probe.Value(); v != "" {
			probes = append(probes, []byte(v))
		}
	}
	if len(probes) == 0 {
		return false
	}
	has := func(x []byte) bool {
		for _, p := range probes {
			if bytes.Contains(x, p) {
				return true
			}
		}
		return false
	}
	if has(b) {
		return true
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return true // not a document the kind wrote: withheld
	}
	var walk func(v any) bool
	str := func(s string) bool {
		if has([]byte(s)) {
			return true
		}
		if len(s) >= minProbeLen && len(s)%4 == 0 {
			if d, err := base64.StdEncoding.DecodeString(s); err == nil && has(d) {
				return true
			}
		}
		return false
	}
	walk = func(v any) bool {
		switch x := v.(type) {
		case string:
			return str(x)
		case []any:
			for _, e := range x {
				if walk(e) {
					return true
				}
			}
		case map[string]any:
			for k, e := range x {
				if str(k) || walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(doc)
}

// listTools lists the server's tools (every page, at most maxTools) and
// keeps them as the current definitions.
func (u *upstream) listTools(ctx context.Context, sess *sdk.ClientSession, maxTools int, what string) (map[string]toolDef, error) {
	u.listMu.Lock()
	defer u.listMu.Unlock()
	u.stale.Store(false) // a change announced from here on is listed next time
	defs := map[string]toolDef{}
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > maxTools {
			return nil, kindapi.Errorf(abi.EIO, "%s: the server's tool list does not end", what)
		}
		res, err := sess.ListTools(ctx, &sdk.ListToolsParams{Cursor: cursor})
		if err != nil {
			u.stale.Store(true)
			return nil, u.failure(ctx, sess, err, what, "listing its tools")
		}
		for _, t := range res.Tools {
			if t == nil {
				continue
			}
			if len(defs) >= maxTools {
				u.stale.Store(true)
				return nil, kindapi.Errorf(abi.ELIMIT, "%s: the server lists more than max_tools %d tools", what, maxTools)
			}
			raw, err := defOf(t)
			if err != nil {
				return nil, kindapi.Errorf(abi.EIO, "%s: the server's tool %s: %v", what, kindapi.QuoteTrunc(t.Name), err)
			}
			canon, err := canonicalDef(raw)
			if err != nil {
				return nil, kindapi.Errorf(abi.EIO, "%s: the server's tool %s: %v", what, kindapi.QuoteTrunc(t.Name), err)
			}
			defs[t.Name] = toolDef{canon: canon, digest: digestOf(canon)}
		}
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	u.defsMu.Lock()
	u.defs = defs
	u.defsMu.Unlock()
	return defs, nil
}

// failure translates an error of a request on sess: the deadline is
// ETIMEDOUT, an error the server answered is EIO with its message, and a
// broken connection drops the session (the next call connects again).
func (u *upstream) failure(ctx context.Context, sess *sdk.ClientSession, err error, what, doing string) error {
	var rpc *jsonrpc.Error
	switch {
	case ctx.Err() != nil:
		return kindapi.Errorf(abi.ETIMEDOUT, "%s: the server %s did not answer within the capability's timeout (%s)", what, u.s.identity, doing)
	case errors.As(err, &rpc):
		return kindapi.Errorf(abi.EIO, "%s: the server %s answered an error (%s): %s", what, u.s.identity, doing, cut(u.redact(rpc.Message)))
	}
	u.drop(sess)
	msg := u.redact(err.Error())
	if strings.Contains(msg, "maximum line length") || strings.Contains(msg, "exceeds") || strings.Contains(msg, "SSE event exceeded") || strings.Contains(msg, "too large") {
		return kindapi.Errorf(abi.ELIMIT, "%s: the server %s sent a message larger than max_response_bytes %d (%s); the connection was closed", what, u.s.identity, u.s.frameBound, doing)
	}
	return kindapi.Errorf(abi.EIO, "%s: the connection to the server %s failed (%s): %s", what, u.s.identity, doing, cut(msg))
}

// cut bounds a message quoted from elsewhere.
func cut(s string) string {
	const max = 256
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}

// httpClient is the egress guard's client of the scope (no proxy, no
// redirects, every address checked), with the scope's headers added to
// every request and a bound on every JSON answer.
func (u *upstream) httpClient(bound int) *http.Client {
	base := u.k.clients.For(u.s.allowPrivate)
	return &http.Client{
		Transport:     &injector{base: base.Transport, headers: u.s.headers, bound: int64(bound)},
		CheckRedirect: base.CheckRedirect,
	}
}

// injector adds the kernel's headers to a request and bounds what is
// read of a JSON answer (the SSE reader bounds each event itself).
type injector struct {
	base    http.RoundTripper
	headers []header
	bound   int64
}

func (t *injector) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	for _, h := range t.headers {
		r.Header.Set(h.name, h.value.Value())
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	perLine := strings.HasPrefix(strings.ToLower(resp.Header.Get("Content-Type")), "text/event-stream")
	resp.Body = &boundedBody{rc: resp.Body, left: t.bound, perLine: perLine}
	return resp, nil
}

// boundedBody fails a read past its bound. An SSE stream is many
// messages: its bound is counted per line.
type boundedBody struct {
	rc      io.ReadCloser
	left    int64
	perLine bool
	line    int64
}

var errTooLarge = errors.New("the answer exceeds max_response_bytes")

func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	for _, c := range p[:n] {
		if c == '\n' && b.perLine {
			b.line = 0
			continue
		}
		b.line++
		if b.line > b.left {
			return 0, errTooLarge
		}
	}
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }

// process is a stdio server's process.
type process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	once   sync.Once
	done   chan struct{}
}

// start starts the scope's command with exactly its environment, in its
// own process group, its stderr to the log.
func (u *upstream) start() (*process, error) {
	s := u.s
	cmd := exec.Command(s.command[0], s.command[1:]...)
	cmd.Env = make([]string, 0, len(s.env))
	for _, e := range s.env {
		cmd.Env = append(cmd.Env, e.name+"="+e.value.Value())
	}
	cmd.Dir = s.dir
	setProcessGroup(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = &stderrLog{log: u.log, redact: u.redact}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, stdin: stdin, stdout: stdout, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		u.log.Debug("mcp: the server's process ended", "err", err)
		close(p.done)
	}()
	return p, nil
}

// kill ends the process and its group.
func (p *process) kill() {
	p.once.Do(func() {
		_ = p.stdin.Close()
		killGroup(p.cmd)
	})
}

// stderrLog logs a server's stderr, a line at a time, bounded.
type stderrLog struct {
	log    hclog.Logger
	redact func(string) string
	mu     sync.Mutex
	buf    []byte
	lines  int
	over   bool // the current line was cut
}

func (w *stderrLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range p {
		if c == '\n' {
			w.flush()
			continue
		}
		if len(w.buf) < maxStderrLine {
			w.buf = append(w.buf, c)
		} else {
			w.over = true
		}
	}
	return len(p), nil
}

func (w *stderrLog) flush() {
	line := string(w.buf)
	w.buf, w.over = w.buf[:0], false
	w.lines++
	switch {
	case w.lines <= maxStderrLines:
		w.log.Info("mcp: server stderr", "line", w.redact(line))
	case w.lines == maxStderrLines+1:
		w.log.Warn("mcp: server stderr: further lines are not logged", "after", maxStderrLines)
	}
}

// Close ends every upstream session and stdio process (and its process
// group). The kind refuses calls afterwards.
func (k *Kind) Close() error {
	k.stopDone()
	k.mu.Lock()
	k.closed = true
	ups := k.ups
	k.ups = map[string]*upstream{}
	k.mu.Unlock()
	var wg sync.WaitGroup
	for _, u := range ups {
		wg.Go(u.close)
	}
	wg.Wait()
	return nil
}
