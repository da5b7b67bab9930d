package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/nodetest"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/runstore"
)

// This file drives "mandate mcp serve" with a client written by others:
// testdata/mcp/client.mjs, on the official MCP TypeScript SDK
// (@modelcontextprotocol/sdk, pinned by testdata/mcp/package-lock.json),
// over stdio and over Streamable HTTP.

// needNode returns the paths of node and npm (nodetest.Need: skipped
// without them, except on CI, where .ci/run installs them).
func needNode(t *testing.T) (node, npm string) { return nodetest.Need(t) }

// npmEnv is the environment of npm and npx (nodetest.Env).
func npmEnv() []string { return nodetest.Env() }

// nodeProject returns a folder holding testdata/mcp's scripts beside the
// packages its lockfile pins (nodetest.Install: npm ci once per lockfile).
func nodeProject(t *testing.T, _ string) string {
	t.Helper()
	src, err := filepath.Abs(filepath.Join("..", "..", "testdata", "mcp"))
	if err != nil {
		t.Fatal(err)
	}
	modules := nodetest.Install(t, src)
	// The scripts are copied, fresh, beside a link to the packages: Node
	// resolves a script's imports from where the script is.
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(modules, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".mjs") || e.Name() == "package.json" {
			b, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// tsResult is what client.mjs prints.
type tsResult struct {
	Mode   string `json:"mode"`
	Server struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"server"`
	Capabilities map[string]any `json:"capabilities"`
	Steps        struct {
		List      []tsTool `json:"list"`
		ListAfter []tsTool `json:"listAfter"`
		Echo      tsCall   `json:"echo"`
		EchoJSON  tsCall   `json:"echoJSON"`
		Refused   tsCall   `json:"refused"`
		Invalid   tsCall   `json:"invalid"`
		Cancel    tsSpin   `json:"cancel"`
		Progress  tsSpin   `json:"progress"`
		Read      tsCall   `json:"read"`
		Flow      tsCall   `json:"flow"`
		After     tsCall   `json:"after"`
	} `json:"steps"`
	ListChanged int    `json:"listChanged"`
	SessionID   string `json:"sessionId"`
	MS          int    `json:"ms"`
	Fatal       string `json:"fatal"`
	CloseError  string `json:"closeError"`
}

type tsTool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"inputSchema"`
}

type tsCall struct {
	IsError    bool           `json:"isError"`
	Text       string         `json:"text"`
	Structured map[string]any `json:"structured"`
}

type tsSpin struct {
	Progress []struct {
		Progress float64 `json:"progress"`
		Total    float64 `json:"total"`
		Message  string  `json:"message"`
	} `json:"progress"`
	Returned       *tsCall `json:"returned"`
	Error          string  `json:"error"`
	Aborted        bool    `json:"aborted"`
	Reason         string  `json:"reason"`
	AbortedAfterMS int     `json:"abortedAfterMs"`
}

// runClient runs client.mjs with args and decodes what it printed.
func runClient(t *testing.T, node, project string, env []string, args ...string) (*tsResult, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(project, "client.mjs")}, args...)...)
	cmd.Dir, cmd.Env = project, env
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("client.mjs %s: %v", args[0], time.Since(start).Round(time.Millisecond))
	var r tsResult
	if jerr := json.Unmarshal(stdout.Bytes(), &r); jerr != nil {
		t.Fatalf("client.mjs: %v; its output (%v):\n%s\nstderr:\n%s", err, jerr, &stdout, &stderr)
	}
	if err != nil || r.Fatal != "" {
		t.Fatalf("client.mjs: %v %s\nstderr:\n%s", err, r.Fatal, &stderr)
	}
	return &r, stderr.String()
}

// checkTSClient checks what the TypeScript client saw.
func checkTSClient(t *testing.T, r *tsResult) {
	t.Helper()
	s := &r.Steps
	if r.Server.Name != "mandate" || r.Capabilities["tools"] == nil {
		t.Errorf("initialize: server %+v, capabilities %v", r.Server, r.Capabilities)
	}
	var names []string
	for _, tool := range s.List {
		names = append(names, tool.Name)
		if tool.Description == "" || tool.InputSchema["type"] != "object" {
			t.Errorf("tools/list: %+v", tool)
		}
	}
	if strings.Join(names, ",") != "echo,my_benefits,web_search" {
		t.Errorf("tools/list: %v", names)
	}
	if s.Echo.IsError || s.Echo.Text != "hello from TypeScript" {
		t.Errorf("echo: %+v", s.Echo)
	}
	if s.EchoJSON.IsError || s.EchoJSON.Structured["echo"] != "structured" {
		t.Errorf("echo with json: %+v", s.EchoJSON)
	}
	// Refused by the kernel: the errno first, then the kernel's reason.
	if !s.Refused.IsError || !strings.HasPrefix(s.Refused.Text, "EDENIED: ") || !strings.Contains(s.Refused.Text, `"/admin" is outside the allowed prefixes`) {
		t.Errorf("the refused call: %+v", s.Refused)
	}
	if !s.Invalid.IsError || !strings.HasPrefix(s.Invalid.Text, "EINVAL: ") {
		t.Errorf("the invalid call: %+v", s.Invalid)
	}
	for name, sp := range map[string]tsSpin{"cancel": s.Cancel, "progress": s.Progress} {
		if !sp.Aborted || sp.Returned != nil || sp.Error == "" {
			t.Errorf("the %s call: %+v", name, sp)
		}
	}
	if s.Cancel.Reason != "canceled by the test" || len(s.Cancel.Progress) != 0 {
		t.Errorf("the canceled call: %+v", s.Cancel)
	}
	// The server sends progress every second while a call runs.
	if p := s.Progress.Progress; len(p) < 1 || s.Progress.Reason != "enough progress" {
		t.Errorf("progress: %+v", s.Progress)
	} else {
		for i := 1; i < len(p); i++ {
			if p[i].Progress <= p[i-1].Progress {
				t.Errorf("progress does not increase: %+v", p)
			}
		}
	}
	if s.Read.IsError || !strings.Contains(s.Read.Text, "Gold PPO") {
		t.Errorf("my_benefits: %+v", s.Read)
	}
	if !s.Flow.IsError || !strings.HasPrefix(s.Flow.Text, "EFLOW: ") {
		t.Errorf("web_search after the record: %+v", s.Flow)
	}
	if len(s.ListAfter) != 3 || !strings.HasPrefix(s.ListAfter[2].Description, "[unavailable in this session: EFLOW") ||
		strings.HasPrefix(s.ListAfter[0].Description, "[unavailable") {
		t.Errorf("tools/list after the record: %+v", s.ListAfter)
	}
	if r.ListChanged < 1 {
		t.Errorf("no notifications/tools/list_changed when web_search became unavailable")
	}
	if s.After.IsError || s.After.Text != "still here" {
		t.Errorf("the last call: %+v", s.After)
	}
}

// taskEndedRE matches the kernel's log line of a task's end.
var taskEndedRE = regexp.MustCompile(`task ended: module=(sha256:[0-9a-f]+) .*task=(t\d+) state=(\w+) elapsed=(\S+)`)

// checkSpinsKilled checks, in the server's log, that the two spinning
// calls' tasks were killed when the client canceled them: killed, and
// after no longer than the client waited before aborting, plus a second.
// Had the cancel not killed them, they would have run on until the
// session ended, at least client.mjs's SETTLE_MS (1.5 s) later.
func checkSpinsKilled(t *testing.T, log string, r *tsResult) {
	t.Helper()
	var killed []time.Duration
	for _, m := range taskEndedRE.FindAllStringSubmatch(log, -1) {
		if strings.Trim(strings.TrimPrefix(m[1], "sha256:"), "0") == "" {
			continue // the session task (sandbox.IdleModule's digest is all zeros)
		}
		if m[3] != string(kernel.TaskKilled) {
			continue
		}
		d, err := time.ParseDuration(m[4])
		if err != nil {
			t.Fatalf("%q: %v", m[0], err)
		}
		killed = append(killed, d)
	}
	if len(killed) != 2 {
		t.Fatalf("%d tool tasks killed, want the 2 canceled calls'; the log:\n%s", len(killed), log)
	}
	for i, sp := range []tsSpin{r.Steps.Cancel, r.Steps.Progress} {
		if limit := time.Duration(sp.AbortedAfterMS)*time.Millisecond + time.Second; killed[i] > limit {
			t.Errorf("canceled call %d: its task was killed after %v, the client canceled it after %d ms", i+1, killed[i], sp.AbortedAfterMS)
		} else {
			t.Logf("canceled call %d: canceled after %d ms, its task killed after %v", i+1, sp.AbortedAfterMS, killed[i])
		}
	}
}

// checkTSRecorded checks the session's run in the run store: one task per
// call that started one, the canceled ones killed.
func checkTSRecorded(t *testing.T, state string) {
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
		t.Fatalf("runs recorded: %+v, want the one session, done", runs)
	}
	rec, err := s.Get(context.Background(), runs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	states := map[kernel.TaskState]int{}
	for _, task := range rec.Tasks {
		if task.Parent != "" {
			states[task.State]++
		}
	}
	// echo, echo json, read, after: done; refused: failed; cancel,
	// progress: killed. The invalid call and the flow refusal started none.
	want := map[kernel.TaskState]int{kernel.TaskDone: 4, kernel.TaskFailed: 1, kernel.TaskKilled: 2}
	if fmt.Sprint(states) != fmt.Sprint(want) {
		t.Errorf("the calls' tasks recorded: %v, want %v", states, want)
	}
}

// TestMCPTypeScriptClientStdio: the TypeScript SDK's client starts
// "mandate mcp serve" and talks to it over stdio.
func TestMCPTypeScriptClientStdio(t *testing.T) {
	node, npm := needNode(t)
	project := nodeProject(t, npm)
	web := searchSite(t)
	dir, policy := mcpPolicy(t, web.URL)
	state := filepath.Join(dir, "state")
	env := append(os.Environ(), "MANDATE_CACHE_DIR="+testCache())
	r, log := runClient(t, node, project, env, "--stdio", "--", buildMandate(t), "mcp", "serve", policy,
		"--state-dir", state, "--log-level", "info")
	checkTSClient(t, r)
	checkSpinsKilled(t, log, r)
	if n := len(web.Requests()); n != 0 {
		t.Errorf("the web saw %d requests; every web_search was refused", n)
	}
	checkTSRecorded(t, state)
}

// TestMCPTypeScriptClientHTTP: the TypeScript SDK's client talks to
// "mandate mcp serve --http" (with a bearer token) over Streamable HTTP.
func TestMCPTypeScriptClientHTTP(t *testing.T) {
	node, npm := needNode(t)
	project := nodeProject(t, npm)
	web := searchSite(t)
	dir, policy := mcpPolicy(t, web.URL)
	state := filepath.Join(dir, "state")
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("ts-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startMCPHTTP(t, policy, "--state-dir", state, "--token-file", token, "--log-level", "info")
	r, _ := runClient(t, node, project, append(os.Environ(), "MCP_TOKEN=ts-s3cret"), "--http", srv.url)
	checkTSClient(t, r)
	if r.SessionID == "" {
		t.Errorf("no Mcp-Session-Id")
	}
	// The client ended its session (DELETE): the server ends the
	// session's task and records its run then, not at shutdown.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(srv.log(), "mandate: session ended: run="); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("the session did not end when the client ended it (DELETE)")
			break
		}
	}
	log := srv.stop(t)
	checkSpinsKilled(t, log, r)
	if n := len(web.Requests()); n != 0 {
		t.Errorf("the web saw %d requests; every web_search was refused", n)
	}
	checkTSRecorded(t, state)
}

// mcpHTTP is a "mandate mcp serve --http 127.0.0.1:0" process.
type mcpHTTP struct {
	url    string
	cmd    *exec.Cmd
	done   chan error
	mu     sync.Mutex
	stderr bytes.Buffer
}

func (s *mcpHTTP) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.Write(p)
}

func (s *mcpHTTP) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// startMCPHTTP starts the built mandate serving policy over HTTP on a
// free loopback port, and waits for its address.
func startMCPHTTP(t *testing.T, policy string, args ...string) *mcpHTTP {
	t.Helper()
	s := &mcpHTTP{done: make(chan error, 1)}
	s.cmd = exec.Command(buildMandate(t), append([]string{"mcp", "serve", policy, "--http", "127.0.0.1:0"}, args...)...)
	s.cmd.Env = append(os.Environ(), "MANDATE_CACHE_DIR="+testCache())
	s.cmd.Stderr = s
	start := time.Now()
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case err := <-s.done:
			s.done <- err
		default:
			s.cmd.Process.Kill()
			<-s.done
		}
	})
	addrRE := regexp.MustCompile(`mandate: serving MCP at (http://\S+)`)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if m := addrRE.FindStringSubmatch(s.log()); m != nil {
			s.url = m[1]
			break
		}
		select {
		case err := <-s.done:
			s.done <- err
			t.Fatalf("mandate mcp serve ended: %v\n%s", err, s.log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("mandate mcp serve did not start:\n%s", s.log())
		}
	}
	t.Logf("mandate mcp serve --http: serving at %s after %v", s.url, time.Since(start).Round(time.Millisecond))
	return s
}

// stop ends the server as a person would (SIGINT) and returns its log.
func (s *mcpHTTP) stop(t *testing.T) string {
	t.Helper()
	if err := s.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		s.done <- err
		if err != nil {
			t.Errorf("mandate mcp serve: %v\n%s", err, s.log())
		}
	case <-time.After(2 * time.Minute): // a hang guard: the end is an event
		s.cmd.Process.Kill()
		<-s.done
		t.Fatalf("mandate mcp serve did not end on SIGINT:\n%s", s.log())
	}
	return s.log()
}
