package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/internal/mcpserve"
	"github.com/mandatevm/mandate/internal/testbin"
	"github.com/mandatevm/mandate/runstore"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Hostile clients of "mandate mcp serve" (issue 13), on the wire: what
// no SDK client sends. The server answers a JSON-RPC error, or (stdio,
// where a bad frame leaves no way to find the next one) ends the session;
// it never panics, starts no task for what it refuses, logs nothing raw,
// and over HTTP goes on serving the session's well-formed requests.

const (
	hostileInitialize  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`
	hostileInitialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	// hostileName is a tool name a log reader's terminal would act on, and
	// a forged log line.
	hostileName = `e\u001b[2J\u001b]0;owned\u0007cho\r\n2026-12-01T00:00:00.000Z [INFO]  mandate: forged: tool=echo\u0000`
)

func rawEchoCall(id int, text string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"op":"echo","text":%q}}}`, id, text)
}

// rpcAnswer is a JSON-RPC response as the tests read it.
type rpcAnswer struct {
	ID     json.RawMessage `json:"id"`
	Result *struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (m rpcAnswer) text() string {
	if m.Result == nil || len(m.Result.Content) == 0 {
		return ""
	}
	return m.Result.Content[0].Text
}

// hostileCase is a request no SDK client sends and what the server answers:
// a JSON-RPC error with code, or a tool error whose text has prefix.
type hostileCase struct {
	name, line string
	id         string // the response's id
	code       int    // a JSON-RPC error's code
	prefix     string // else a tool error's prefix
}

// hostileServedCases are answered, and the session serves on.
var hostileServedCases = []hostileCase{
	{name: "tools/call with a number for a name", line: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":7,"arguments":"x"}}`, id: "2", code: -32602},
	{name: "tools/call with null params", line: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":null}`, id: "3", code: -32600},
	{name: "tools/call with no params", line: `{"jsonrpc":"2.0","id":4,"method":"tools/call"}`, id: "4", code: -32600},
	{name: "an unknown method", line: `{"jsonrpc":"2.0","id":5,"method":"no/such","params":{}}`, id: "5", code: -32601},
	{name: "arguments an array", line: `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":[1]}}`, id: "6", prefix: "EINVAL"},
	{name: "arguments with a duplicate key", line: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"op":"echo","op":"spin"}}}`, id: "7", prefix: "EINVAL"},
	{name: "arguments with a lone surrogate", line: `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"op":"echo","text":"\ud800"}}}`, id: "8", prefix: "EINVAL"},
	{name: "arguments with a number past float64", line: `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"op":"echo","text":1e999}}}`, id: "9", prefix: "EINVAL"},
	{name: "arguments of the wrong type", line: `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"echo","arguments":{"op":["echo"]}}}`, id: "10", prefix: "EINVAL"},
	{name: "a second initialize", line: hostileInitialize[:len(`{"jsonrpc":"2.0","id":`)] + "11" + hostileInitialize[len(`{"jsonrpc":"2.0","id":1`):], id: "11", code: 0},
	{name: "a tool name with control characters", line: `{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"` + hostileName + `","arguments":{"op":"echo","text":"x"}}}`, id: "12", code: -32602},
}

// hostileFatalCases end a stdio session (over HTTP: 400, the session serves on).
var hostileFatalCases = []hostileCase{
	{name: "garbage", line: "\x1b[2J\x1b]0;owned\x07garbage\x00 not json"},
	{name: "binary", line: "\x00\xff\xfe\x9b"},
	{name: "an unterminated object", line: `{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"echo"`},
	{name: "a number for the version", line: `{"jsonrpc":1,"id":{},"method":[]}`},
	{name: "a number for the method", line: `{"jsonrpc":"2.0","id":21,"method":7}`},
	{name: "no version", line: `{"id":22,"method":"tools/list"}`},
	{name: "an empty batch", line: `[]`},
	{name: "a batch of numbers", line: `[1,2]`},
	{name: "an object for an id", line: `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`},
	{name: "nesting 100000 deep", line: `{"jsonrpc":"2.0","id":23,"method":"tools/call","params":{"name":"echo","arguments":{"op":"echo","body":` +
		strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}}}`},
	{name: "nesting 2000 deep in the arguments", line: `{"jsonrpc":"2.0","id":24,"method":"tools/call","params":{"name":"echo","arguments":{"op":"echo","body":` +
		strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + `}}}`},
}

// checkHostileLogs fails when the server's logs carry a byte a terminal acts
// on, a forged line or a panic.
func checkHostileLogs(t *testing.T, logs string) {
	t.Helper()
	for i, r := range logs {
		if r != '\n' && r != '\t' && (r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 || r == '\ufffd') {
			t.Errorf("the logs carry %U raw at %d: %q", r, i, logs[max(0, i-80):min(len(logs), i+80)])
			break
		}
	}
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "forged") && strings.HasPrefix(l, "2026-12-01T00:00:00.000Z") {
			t.Errorf("a forged line reached the logs: %q", l)
		}
	}
	if strings.Contains(logs, "panic") || strings.Contains(logs, "goroutine ") {
		t.Errorf("the server panicked:\n%s", logs)
	}
}

// toolTasksLogged counts the tool tasks the server's logs say started.
func toolTasksLogged(logs string) int {
	n := 0
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "task started") && strings.Contains(l, "parent=") {
			n++
		}
	}
	return n
}

// recordedSessionTasks is how many tasks the one run of state recorded (the
// session's and one per call that started).
func recordedSessionTasks(t *testing.T, state string) int {
	t.Helper()
	s, err := runstore.OpenReadOnly(state)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runs, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].State != "done" {
		t.Fatalf("runs %+v, want the one session, done", runs)
	}
	return runs[0].Tasks
}

// hostileStdioServer is "mandate mcp serve" on pipes, spoken to line by line.
type hostileStdioServer struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    chan rpcAnswer
	stderr *kerneltest.Buffer
	state  string
}

func startHostileStdio(t *testing.T, web string) *hostileStdioServer {
	t.Helper()
	dir, policy := mcpPolicy(t, web)
	s := &hostileStdioServer{t: t, out: make(chan rpcAnswer, 100), stderr: &kerneltest.Buffer{}, state: filepath.Join(dir, "state")}
	s.cmd = exec.Command(buildMandate(t), "mcp", "serve", policy, "--state-dir", s.state, "--log-level", "trace")
	s.cmd.Env = append(os.Environ(), "MANDATE_CACHE_DIR="+testCache())
	s.cmd.Stderr = s.stderr
	var err error
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.cmd.Process.Kill(); s.cmd.Wait() })
	go func() {
		defer close(s.out)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var m rpcAnswer
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("stdout is not JSON-RPC: %v: %.200q", err, sc.Text())
				continue
			}
			s.out <- m
		}
	}()
	s.send(hostileInitialize)
	if m, ok := s.next(); !ok || m.Result == nil && m.Error != nil {
		t.Fatalf("initialize: %+v\n%s", m, s.stderr)
	}
	s.send(hostileInitialized)
	return s
}

func (s *hostileStdioServer) send(line string) {
	io.WriteString(s.stdin, line+"\n") // the server may have gone: its answer says
}

// next is the next message, false when stdout closed.
func (s *hostileStdioServer) next() (rpcAnswer, bool) {
	s.t.Helper()
	select {
	case m, ok := <-s.out:
		return m, ok
	case <-time.After(60 * time.Second):
		s.t.Fatalf("no answer in a minute\n%s", s.stderr)
		return rpcAnswer{}, false
	}
}

// wait closes stdin and waits for the server to exit, returning its exit
// code.
func (s *hostileStdioServer) wait() int {
	s.t.Helper()
	s.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		s.t.Fatalf("mandate mcp serve did not exit\n%s", s.stderr)
	}
	return s.cmd.ProcessState.ExitCode()
}

func checkHostileAnswer(t *testing.T, c hostileCase, m rpcAnswer) {
	t.Helper()
	switch {
	case c.id == "":
		if m.Error == nil {
			t.Errorf("%s: %+v, want an error", c.name, m)
		}
	case string(m.ID) != c.id:
		t.Errorf("%s: answered id %s, want %s", c.name, m.ID, c.id)
	case c.prefix != "":
		if m.Result == nil || !m.Result.IsError || !strings.HasPrefix(m.text(), c.prefix) {
			t.Errorf("%s: %+v, want a tool error %s", c.name, m, c.prefix)
		}
	case m.Error == nil || m.Error.Code != c.code:
		t.Errorf("%s: %+v, want the JSON-RPC error %d", c.name, m, c.code)
	}
	if m.Error != nil {
		for _, r := range m.Error.Message {
			if r < 0x20 || r == 0x7f {
				t.Errorf("%s: the error carries %U raw: %q", c.name, r, m.Error.Message)
				break
			}
		}
	}
}

// TestMCPHostileStdio: over stdio, requests of the wrong shape are
// answered with JSON-RPC or tool errors and the session serves on; a
// frame that is no JSON-RPC message ends the session, with no task
// started and no panic, and the session recorded.
func TestMCPHostileStdio(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mandate and a guest")
	}
	web := searchSite(t)

	s := startHostileStdio(t, web.URL)
	for i, c := range hostileServedCases {
		s.send(c.line)
		m, ok := s.next()
		if !ok {
			t.Fatalf("%s: the server ended\n%s", c.name, s.stderr)
		}
		checkHostileAnswer(t, c, m)
		want := fmt.Sprintf("after %d", i)
		s.send(rawEchoCall(1000+i, want))
		if m, ok := s.next(); !ok || m.text() != want {
			t.Fatalf("%s: the next echo: %+v\n%s", c.name, m, s.stderr)
		}
	}
	if code := s.wait(); code != 0 {
		t.Errorf("exit %d\n%s", code, s.stderr)
	}
	logs := s.stderr.String()
	checkHostileLogs(t, logs)
	if n := toolTasksLogged(logs); n != len(hostileServedCases) {
		t.Errorf("%d tool tasks started, want the %d echoes", n, len(hostileServedCases))
	}
	if n := recordedSessionTasks(t, s.state); n != 1+len(hostileServedCases) {
		t.Errorf("%d tasks recorded, want the session and %d echoes", n, len(hostileServedCases))
	}

	huge := rawEchoCall(30, strings.Repeat("a", maxMCPRequest+1))
	for _, c := range append(hostileFatalCases,
		hostileCase{name: "arguments past MaxArgBytes (a frame past 16 MiB)", line: huge},
		// In one write with a notification, the server reads the frame's
		// start with the notification's end (CI found the SDK's own
		// bound passing such a frame).
		hostileCase{name: "a frame past 16 MiB on the heels of a notification", line: hostileInitialized + "\n" + huge},
	) {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			s := startHostileStdio(t, web.URL)
			s.send(c.line)
			s.send(rawEchoCall(31, "after"))
			// Each message is an error, or there is none: the session ends.
			for {
				m, ok := s.next()
				if !ok {
					break
				}
				if m.Error == nil {
					t.Errorf("answered %+v", m)
				}
			}
			code := s.wait()
			logs := s.stderr.String()
			t.Logf("exit %d: %s", code, logs[strings.LastIndex(strings.TrimSpace(logs), "\n")+1:])
			if code != exitOK && code != exitUsage {
				t.Errorf("exit %d\n%s", code, logs)
			}
			checkHostileLogs(t, logs)
			if n := toolTasksLogged(logs); n != 0 {
				t.Errorf("%d tool tasks started", n)
			}
			if n := recordedSessionTasks(t, s.state); n != 1 {
				t.Errorf("%d tasks recorded, want the session's alone", n)
			}
		})
	}
}

// hostileHTTPServer is "mandate mcp serve --http" in process.
type hostileHTTPServer struct {
	url, token, state string
	logs              func() string
	stop              func()
}

func startHostileHTTP(t *testing.T, web string) *hostileHTTPServer {
	t.Helper()
	dir, policy := mcpPolicy(t, web)
	return startHostileHTTPPolicy(t, dir, policy, "trace")
}

func startHostileHTTPPolicy(t testing.TB, dir, policy, level string) *hostileHTTPServer {
	t.Helper()
	h := &hostileHTTPServer{token: "s3cret", state: filepath.Join(dir, "state")}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(h.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var stderr bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return stderr.Write(p) })
	e := &env{stdout: &bytes.Buffer{}, stderr: w, getenv: func(string) string { return "" }, ctx: ctx}
	served := make(chan int, 1)
	go func() {
		served <- e.main([]string{"mcp", "serve", policy, "--http", "127.0.0.1:0", "--token-file", tokenFile,
			"--state-dir", h.state, "--cache-dir", testCache(), "--log-level", level})
	}()
	h.logs = func() string { mu.Lock(); defer mu.Unlock(); return stderr.String() }
	addrRE := regexp.MustCompile(`serving MCP at (http://\S+)`)
	for deadline := time.Now().Add(2 * time.Minute); h.url == ""; time.Sleep(20 * time.Millisecond) {
		if m := addrRE.FindStringSubmatch(h.logs()); m != nil {
			h.url = m[1]
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("the server did not start:\n%s", h.logs())
		}
	}
	var once sync.Once
	h.stop = func() {
		once.Do(func() {
			cancel()
			if code := <-served; code != 0 {
				t.Errorf("mandate mcp serve exited %d:\n%s", code, h.logs())
			}
		})
	}
	t.Cleanup(h.stop)
	return h
}

// post sends body to the server (in session, when set) and returns the
// status, the session ID it names, the plain body and the JSON-RPC
// messages of an event stream or a JSON answer.
func (h *hostileHTTPServer) post(t *testing.T, session string, body []byte) (int, string, string, []rpcAnswer) {
	t.Helper()
	req, _ := http.NewRequest("POST", h.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+h.token)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var msgs []rpcAnswer
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimPrefix(l, "data: ")
		var m rpcAnswer
		if strings.HasPrefix(l, "{") && json.Unmarshal([]byte(l), &m) == nil {
			msgs = append(msgs, m)
		}
	}
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b), msgs
}

// TestMCPHostileHTTP: over Streamable HTTP, every malformed request of a
// session is refused (400, or a JSON-RPC or tool error) and the session's
// next well-formed call is served; a body past maxMCPRequest (so
// arguments past MaxArgBytes) is refused with no task started, in and out
// of a session; requests with no session start none; logs carry nothing
// raw.
func TestMCPHostileHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a guest")
	}
	web := searchSite(t)
	h := startHostileHTTP(t, web.URL)
	code, sid, body, _ := h.post(t, "", []byte(hostileInitialize))
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %q %s", code, sid, body)
	}
	if code, _, body, _ := h.post(t, sid, []byte(hostileInitialized)); code != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", code, body)
	}
	echoes := 0
	echo := func(what string) {
		t.Helper()
		echoes++
		want := fmt.Sprintf("after %d", echoes)
		code, _, body, msgs := h.post(t, sid, []byte(rawEchoCall(1000+echoes, want)))
		if code != http.StatusOK || len(msgs) != 1 || msgs[0].text() != want {
			t.Fatalf("%s: the next echo: %d %s", what, code, body)
		}
	}
	for _, c := range hostileServedCases {
		code, _, body, msgs := h.post(t, sid, []byte(c.line))
		switch {
		case code == http.StatusBadRequest && c.prefix == "":
			// The SDK refuses some before the session (an unknown
			// method, missing params): an error all the same.
		case code != http.StatusOK || len(msgs) != 1:
			t.Errorf("%s: %d %s", c.name, code, body)
		default:
			checkHostileAnswer(t, c, msgs[0])
		}
		echo(c.name)
	}
	for _, c := range hostileFatalCases {
		code, _, body, _ := h.post(t, sid, []byte(c.line))
		if code != http.StatusBadRequest {
			t.Errorf("%s: %d %.200q", c.name, code, body)
		}
		echo(c.name)
	}
	// Past the body bound: in the session, and as a session's first
	// request; and just under it, refused by the session's own checks
	// or served, never past them.
	tasks := toolTasksLogged(h.logs())
	huge := []byte(rawEchoCall(40, strings.Repeat("a", maxMCPRequest)))
	code, _, body, _ = h.post(t, sid, huge)
	t.Logf("a body of %d bytes in the session: %d %.100q", len(huge), code, body)
	if code != http.StatusRequestEntityTooLarge && code != http.StatusBadRequest {
		t.Errorf("a body of %d bytes in the session: %d %.200s", len(huge), code, body)
	}
	if args := mcpserve.MaxArgBytes + 1; args+1024 < maxMCPRequest {
		// Arguments past the session's bound in a body within the HTTP
		// one: the session refuses them.
		code, _, body, msgs := h.post(t, sid, []byte(rawEchoCall(41, strings.Repeat("a", args))))
		if code != http.StatusOK || len(msgs) != 1 || msgs[0].Result == nil || !msgs[0].Result.IsError || !strings.HasPrefix(msgs[0].text(), "ELIMIT") {
			t.Errorf("arguments of %d bytes: %d %.200s", args, code, body)
		}
	} else {
		t.Logf("arguments past MaxArgBytes (%d) need a body past maxMCPRequest (%d)", mcpserve.MaxArgBytes, maxMCPRequest)
	}
	hugeInit := []byte(hostileInitialize[:len(hostileInitialize)-1] + `,"padding":"` + strings.Repeat("a", maxMCPRequest) + `"}`)
	if code, sid2, body, _ := h.post(t, "", hugeInit); code != http.StatusRequestEntityTooLarge || sid2 != "" {
		t.Errorf("an initialize of %d bytes: %d %q %.200s", len(hugeInit), code, sid2, body)
	}
	if n := toolTasksLogged(h.logs()); n != tasks {
		t.Errorf("bodies past the bound started %d tasks", n-tasks)
	}
	echo("the bodies past the bound")
	// With no session: refused, and no session started.
	for _, b := range []string{"garbage", rawEchoCall(50, "x"), strings.Repeat("[", 100000)} {
		code, sid2, body, msgs := h.post(t, "", []byte(b))
		refused := code >= 400 || len(msgs) == 1 && msgs[0].Error != nil
		if !refused || sid2 != "" {
			t.Errorf("%.40q with no session: %d %q %.400s", b, code, sid2, body)
		}
	}
	// A session that is not this server's.
	if code, _, body, _ := h.post(t, "NOSUCHSESSION", []byte(rawEchoCall(51, "x"))); code != http.StatusNotFound {
		t.Errorf("an unknown session: %d %.200s", code, body)
	}
	echo("the requests with no session")
	h.stop()
	logs := h.logs()
	checkHostileLogs(t, logs)
	if n := strings.Count(logs, "session started"); n != 1 {
		t.Errorf("%d sessions started, want 1", n)
	}
	if n := toolTasksLogged(logs); n != echoes {
		t.Errorf("%d tool tasks started, want the %d echoes", n, echoes)
	}
	if n := recordedSessionTasks(t, h.state); n != 1+echoes {
		t.Errorf("%d tasks recorded, want the session and %d echoes", n, echoes)
	}
}

// TestMCPHostileHTTPCancel: over HTTP, a client that cancels its calls
// (notifications/cancelled) has their tasks killed and its next calls
// served.
func TestMCPHostileHTTPCancel(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a guest")
	}
	web := searchSite(t)
	h := startHostileHTTP(t, web.URL)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: h.url, HTTPClient: &http.Client{Transport: bearer{h.token}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for i := range 3 {
		started := toolTasksLogged(h.logs())
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"op": "spin"}})
			errc <- err
		}()
		for deadline := time.Now().Add(30 * time.Second); toolTasksLogged(h.logs()) == started; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the spinning call's task did not start")
			}
		}
		cancel()
		if err := <-errc; err == nil {
			t.Fatal("a canceled call returned a result")
		}
		for deadline := time.Now().Add(30 * time.Second); strings.Count(h.logs(), "state=killed") < i+1; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the canceled call's task was not killed:\n%s", h.logs())
			}
		}
		want := fmt.Sprintf("after cancel %d", i)
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"op": "echo", "text": want}})
		if err != nil || r.IsError || len(r.Content) != 1 || r.Content[0].(*mcp.TextContent).Text != want {
			t.Fatalf("echo after cancel %d: %v %+v", i, err, r)
		}
	}
	cs.Close()
	h.stop()
	checkHostileLogs(t, h.logs())
	if n := recordedSessionTasks(t, h.state); n != 1+6 {
		t.Errorf("%d tasks recorded, want the session, 3 canceled and 3 echoes", n)
	}
}

// TestMCPHTTPEndedSessionsAreFreed: a client that opens sessions and
// closes them does not grow the server's heap: an ended session's
// kernel, tasks and results are garbage.
func TestMCPHTTPEndedSessionsAreFreed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a guest")
	}
	web := searchSite(t)
	h := startHostileHTTP(t, web.URL)
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	const size = 8 << 20
	session := func() {
		t.Helper()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: h.url, HTTPClient: &http.Client{Transport: bearer{h.token}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"op": "echo", "text": strings.Repeat("x", size)}})
		if err != nil || r.IsError {
			t.Fatalf("echo: %v %v", err, r)
		}
		cs.Close()
	}
	ended := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); strings.Count(h.logs(), "session ended") < n; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d sessions ended, want %d", strings.Count(h.logs(), "session ended"), n)
			}
		}
	}
	session()
	ended(1)
	before := heap()
	const n = 5
	for range n {
		session()
	}
	ended(1 + n)
	// "session ended" is logged before the server drops the session's
	// last references (its transport, the HTTP handler's map): a leak
	// never falls back, a session let go of a moment late does.
	after := heap()
	for deadline := time.Now().Add(10 * time.Second); after > before+2*size && time.Now().Before(deadline); after = heap() {
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("heap %d MiB before, %d MiB after %d more sessions of %d MiB each", before>>20, after>>20, n, size>>20)
	if after > before+2*size {
		t.Errorf("the heap grew by %d MiB over %d ended sessions", (after-before)>>20, n)
	}
}

// echoBenchPolicy writes a policy serving testdata/guests/mcp-tool as the one
// tool echo, for benchmarks (mcpPolicy needs a *testing.T).
func echoBenchPolicy(tb testing.TB) (dir, policy string) {
	tb.Helper()
	dir = tb.TempDir()
	guest, err := filepath.Abs(filepath.Join("..", "..", "testdata", "guests", "mcp-tool"))
	if err != nil {
		tb.Fatal(err)
	}
	policy = filepath.Join(dir, "echo.hcl")
	src := `session {
  principal = "alice"
}
tool "echo" {
  module       = "` + filepath.ToSlash(guest) + `"
  description  = "Echo a text."
  input_schema = { type = "object", properties = { op = { type = "string" }, text = { type = "string" } }, required = ["op"] }
}
`
	if err := os.WriteFile(policy, []byte(src), 0o644); err != nil {
		tb.Fatal(err)
	}
	return dir, policy
}

// BenchmarkMCPToolCall is a no-op tool call (mcp-tool's op "echo")
// through "mandate mcp serve" as a client makes it with the Go SDK, each
// case a new session: one call at a time and four at once, over stdio to
// the built binary and over Streamable HTTP on loopback to the server in
// process (at its default log level, its run store recording the session
// after every call); and over HTTP once the session has made 1,000 calls
// (every call's record rewrites the session so far). Reports calls/s and
// the p50 and p99 of the calls' latencies; the task's own share is
// BenchmarkToolCall/kernel in internal/mcpserve. stdio-vs-plain is the
// stdio call beside a plain server on the same SDK, interleaved in one
// run, with each server's CPU per call (benchMCPVersusPlain).
func BenchmarkMCPToolCall(b *testing.B) {
	if testing.Short() {
		b.Skip("builds mandate and a guest")
	}
	b.Run("stdio", func(b *testing.B) {
		bin := testbin.Mandate(b)
		dir, policy := echoBenchPolicy(b)
		connect := func(b *testing.B) *mcp.ClientSession {
			cmd := exec.Command(bin, "mcp", "serve", policy, "--state-dir", filepath.Join(dir, "state"))
			cmd.Env = append(os.Environ(), "MANDATE_CACHE_DIR="+testCache())
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				b.Fatal(err)
			}
			return cs
		}
		benchMCPSessions(b, connect, false)
	})
	b.Run("stdio-vs-plain", func(b *testing.B) { benchMCPVersusPlain(b, testbin.Mandate(b)) })
	b.Run("http", func(b *testing.B) {
		dir, policy := echoBenchPolicy(b)
		h := startHostileHTTPPolicy(b, dir, policy, "info")
		connect := func(b *testing.B) *mcp.ClientSession {
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(),
				&mcp.StreamableClientTransport{Endpoint: h.url, HTTPClient: &http.Client{Transport: bearer{h.token}}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			return cs
		}
		benchMCPSessions(b, connect, true)
	})
}

func benchMCPSessions(b *testing.B, connect func(*testing.B) *mcp.ClientSession, long bool) {
	echo := func(cs *mcp.ClientSession) func() error {
		return func() error {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"op": "echo", "text": "hi"}})
			if err != nil {
				return err
			}
			if res.IsError || len(res.Content) != 1 {
				return fmt.Errorf("echo: %+v", res)
			}
			if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "hi" {
				return fmt.Errorf("echo: %+v", res.Content[0])
			}
			return nil
		}
	}
	cases := []struct {
		name       string
		conc, warm int
	}{{"sequential", 1, 5}, {"concurrent-4", 4, 5}}
	if long {
		cases = append(cases, struct {
			name       string
			conc, warm int
		}{"sequential-after-1000", 1, 1000})
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			cs := connect(b)
			defer cs.Close()
			kerneltest.BenchCalls(b, c.conc, c.warm, echo(cs))
		})
	}
}
