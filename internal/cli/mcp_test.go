package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/runstore"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpPolicy writes a policy serving testdata/guests/mcp-tool as three
// tools: echo, my_benefits (Alice's own record) and web_search (a public
// origin).
func mcpPolicy(t *testing.T, web string) (dir, policy string) {
	t.Helper()
	dir = t.TempDir()
	guest, err := filepath.Abs(filepath.Join("..", "..", "testdata", "guests", "mcp-tool"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "benefits.json"), []byte(
		`[{"id":"alice","owner":"alice","fields":{"plan":"Gold PPO"},"labels":{"plan":["pii:$owner"]}}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	policy = filepath.Join(dir, "desk.hcl")
	src := `session {
  principal = "alice"
  clearance = ["pii:alice"]
  seed "benefits" {
    file = "benefits.json"
  }
}
tool "echo" {
  module       = "` + filepath.ToSlash(guest) + `"
  description  = "Echo a text."
  input_schema = { type = "object", properties = { op = { type = "string" }, text = { type = "string" } }, required = ["op"] }
}
tool "my_benefits" {
  module      = "` + filepath.ToSlash(guest) + `"
  description = "Your own benefits record."
  cap "data" "records" {
    collection = "benefits"
    records    = "own"
    fields     = ["plan"]
  }
}
tool "web_search" {
  module      = "` + filepath.ToSlash(guest) + `"
  description = "Search the web."
  cap "net" "web" {
    origin        = "` + web + `"
    methods       = ["GET"]
    paths         = ["/search"]
    allow_private = true
  }
}
`
	if err := os.WriteFile(policy, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, policy
}

// searchSite is the web fixture of mcpPolicy's web_search: it answers
// "results" and records every request; closed when the test ends.
func searchSite(t *testing.T) *kerneltest.Recorder {
	t.Helper()
	web := kerneltest.NewRecorder(func(w http.ResponseWriter, _ *http.Request, _ kerneltest.Request) { fmt.Fprint(w, "results") })
	t.Cleanup(web.Close)
	return web
}

// mcpStory is the session, through a real client: web_search
// works, my_benefits works, then web_search is refused (EFLOW) and listed
// unavailable.
func mcpStory(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	ctx := context.Background()
	call := func(name string, args map[string]any) (string, bool) {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("call %s: %v", name, err)
		}
		return toolText(r), r.IsError
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 3 {
		t.Fatalf("tools/list: %v %v", tools, err)
	}
	if out, isErr := call("echo", map[string]any{"op": "echo", "text": "hi"}); isErr || out != "hi" {
		t.Errorf("echo: %q", out)
	}
	if out, isErr := call("web_search", map[string]any{"op": "fetch", "path": "/search?q=dentist"}); isErr || out != "results" {
		t.Errorf("web_search: %q", out)
	}
	if out, isErr := call("my_benefits", map[string]any{"op": "read", "owner": "alice"}); isErr || !strings.Contains(out, "Gold PPO") {
		t.Errorf("my_benefits: %q", out)
	}
	if out, isErr := call("web_search", map[string]any{"op": "fetch", "path": "/search?q=Gold+PPO"}); !isErr || !strings.HasPrefix(out, "EFLOW") {
		t.Errorf("web_search after the record: %v %q", isErr, out)
	}
	if out, isErr := call("echo", map[string]any{"text": "no op"}); !isErr || !strings.Contains(out, "EINVAL") {
		t.Errorf("an invalid call: %q", out)
	}
}

func checkSessionRecorded(t *testing.T, state string) {
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
	for _, r := range runs {
		t.Logf("run %s %s tasks=%d", r.ID, r.State, r.Tasks)
	}
	if len(runs) != 1 {
		t.Fatalf("%d runs recorded, want the one session", len(runs))
	}
	// The session and one task per call that started (the refused and
	// the invalid calls started none).
	if r := runs[0]; r.State != "done" || r.Tasks != 4 {
		t.Errorf("the session's run: %s with %d tasks, want done with 4", r.State, r.Tasks)
	}
}

// serveStdio starts "mandate mcp serve" on mcpPolicy's desk over stdio
// (its web fixture closed with t) and connects a client to it.
func serveStdio(t *testing.T, level string) (cs *mcp.ClientSession, cmd *exec.Cmd, state string, stderr *bytes.Buffer) {
	t.Helper()
	web := searchSite(t)
	dir, policy := mcpPolicy(t, web.URL)
	state = filepath.Join(dir, "state")
	cmd = exec.Command(buildMandate(t), "mcp", "serve", policy, "--state-dir", state, "--log-level", level)
	cmd.Env = append(os.Environ(), "MANDATE_CACHE_DIR="+testCache())
	stderr = &bytes.Buffer{}
	cmd.Stderr = stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr)
	}
	return cs, cmd, state, stderr
}

// TestMCPServeStdio runs "mandate mcp serve" as a client would, over
// stdio, and checks the session's story and its record.
func TestMCPServeStdio(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mandate and a guest")
	}
	cs, cmd, state, _ := serveStdio(t, "warn")
	mcpStory(t, cs)
	cs.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute): // a hang guard: the end is an event
		cmd.Process.Kill()
		t.Fatal("mandate mcp serve did not end when the client closed stdin")
	}
	checkSessionRecorded(t, state)
}

// TestMCPServeHTTP serves Streamable HTTP in process, with a bearer token.
func TestMCPServeHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a guest")
	}
	web := searchSite(t)
	dir, policy := mcpPolicy(t, web.URL)
	state := filepath.Join(dir, "state")
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var stderr bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return stderr.Write(p) })
	e := &env{stdout: &bytes.Buffer{}, stderr: w, getenv: func(string) string { return "" }, ctx: ctx}
	served := make(chan int, 1)
	go func() {
		served <- e.main([]string{"mcp", "serve", policy, "--http", "127.0.0.1:0", "--token-file", tokenFile,
			"--state-dir", state, "--cache-dir", testCache(), "--log-level", "debug"})
	}()
	addrRE := regexp.MustCompile(`serving MCP at (http://\S+)`)
	var url string
	for deadline := time.Now().Add(2 * time.Minute); url == ""; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		if m := addrRE.FindStringSubmatch(stderr.String()); m != nil {
			url = m[1]
		}
		out := stderr.String()
		mu.Unlock()
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("the server did not start:\n%s", out)
		}
	}
	// Without the token: refused.
	resp, err := http.Post(url, "application/json", strings.NewReader(`{}`))
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %v %v", resp, err)
	}
	resp.Body.Close()
	hc := &http.Client{Transport: bearer{"s3cret"}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mcpStory(t, cs)
	// Live: the session is recorded as it goes (at most a second late).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		rs, err := runstore.OpenReadOnly(state)
		if err != nil {
			t.Fatal(err)
		}
		runs, err := rs.List(context.Background())
		rs.Close()
		if err == nil && len(runs) == 1 && runs[0].State == runstore.StateRunning && runs[0].Tasks == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the live session: %+v, %v; want running with 4 tasks", runs, err)
		}
	}
	cs.Close()
	cancel()
	if code := <-served; code != 0 {
		t.Fatalf("mandate mcp serve exited %d:\n%s", code, &stderr)
	}
	mu.Lock()
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, "new MCP session") {
			t.Log(l)
		}
	}
	mu.Unlock()
	checkSessionRecorded(t, state)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestCheckPolicy: mandate check on a policy says what the session could
// be shown and which tools it would then lose, without running anything.
func TestCheckPolicy(t *testing.T) {
	_, policy := mcpPolicy(t, "http://127.0.0.1:1")
	var o, e bytes.Buffer
	if code := Main([]string{"check", policy}, nil, &o, &e); code != 0 {
		t.Fatalf("exit %d: %s", code, &e)
	}
	for _, want := range []string{
		"a session acting for alice, cleared for {pii:alice}",
		"could be shown: {pii:alice}",
		`once it was shown that, web_search is refused (EFLOW): net "web" is cleared for {}, not {pii:alice}`,
		"== tool my_benefits",
	} {
		if !strings.Contains(o.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, &o)
		}
	}
	o.Reset()
	if code := Main([]string{"check", policy, "--format", "json"}, nil, &o, &e); code != 0 || !strings.Contains(o.String(), `"unavailable_after"`) {
		t.Errorf("json: exit %d\n%s", code, &o)
	}
	// A policy's own problems are reported as a policy's: the variables
	// it needs, not "this is a policy, not a task manifest".
	o.Reset()
	e.Reset()
	desk := filepath.Join("..", "..", "examples", "mcpdesk", "desk.hcl")
	if code := Main([]string{"check", desk}, nil, &o, &e); code != 2 || !strings.Contains(e.String(), `variable "search" is not set: pass --var search=VALUE`) ||
		strings.Contains(e.String(), "this is a policy") {
		t.Errorf("a policy without its variables: exit %d\n%s", code, &e)
	}
}

// TestMCPSessionForgetsRecordedCalls: a session's kernel forgets the calls
// that ended once they are recorded (a session serving calls for days does
// not grow), and the record keeps every one of them, with its result.
func TestMCPSessionForgetsRecordedCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mandate and a guest")
	}
	cs, _, state, stderr := serveStdio(t, "debug")
	echo := func(text string) {
		t.Helper()
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"op": "echo", "text": text}})
		if err != nil || r.IsError {
			t.Fatalf("echo %s: %v %v", text, err, r)
		}
	}
	echo("one")
	echo("two")
	// Past the snapshot's debounce (a second): recorded, then forgotten.
	time.Sleep(1500 * time.Millisecond)
	echo("three")
	cs.Close() // waits for the server to exit
	if !strings.Contains(stderr.String(), "ended tasks recorded and forgotten") || !strings.Contains(stderr.String(), "kept=1") {
		t.Errorf("the session's kernel did not forget the calls recorded:\n%s", stderr)
	}
	s, err := runstore.OpenReadOnly(state)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rec, err := s.Get(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Tasks) != 4 || rec.Tasks[0].Parent != "" {
		t.Fatalf("the session's record has %d tasks, want the session and its 3 calls: %+v", len(rec.Tasks), rec.Tasks)
	}
	outs, err := s.Outputs(context.Background(), rec.Run.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	var results []string
	for _, o := range outs {
		if o.Stream == runstore.StreamResult {
			results = append(results, string(o.Data))
		}
	}
	if strings.Join(results, ",") != "one,two,three" {
		t.Errorf("the calls' results recorded: %q, want one, two, three", results)
	}
}

// TestMCPServeStdioClosedAtOnce: a client that writes its requests and
// closes its end at once (echo ... | mandate mcp serve) gets every answer
// before the session ends. (It used to get none: the session ended at the
// input's end with its answers unsent.)
func TestMCPServeStdioClosedAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mandate and a guest")
	}
	web := searchSite(t)
	dir, policy := mcpPolicy(t, web.URL)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"three","method":"tools/call","params":{"name":"echo","arguments":{"op":"echo","text":"hi"}}}`,
	}, "\n") // the last line has no newline
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, buildMandate(t), "mcp", "serve", policy, "--state-dir", filepath.Join(dir, "state"), "--log-level", "warn")
	cmd.Env = append(os.Environ(), "MANDATE_CACHE_DIR="+testCache())
	cmd.Stdin = strings.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, &stderr)
	}
	answered := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil || len(m.Result) == 0 {
			t.Errorf("not an answer: %s", line)
			continue
		}
		answered[string(m.ID)] = string(m.Result)
	}
	if len(answered) != 3 || !strings.Contains(answered["1"], `"protocolVersion"`) || !strings.Contains(answered["2"], `"echo"`) ||
		!strings.Contains(answered[`"three"`], `"text":"hi"`) {
		t.Errorf("answers: %v\nstderr:\n%s", answered, &stderr)
	}
}
