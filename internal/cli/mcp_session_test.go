package cli

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPSessionOnTheHost: a session of "mandate mcp serve" is a run on
// the process's host, configured as every run is. A tool spawns a child
// under a spawn capability, and the child is in the session's graph; the
// session's run streams to "mandate ui" live, while the session goes on;
// and however many sessions there are, the process has one engine.
func TestMCPSessionOnTheHost(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mandate and a guest")
	}
	dir, policy := mcpPolicy(t, "http://127.0.0.1:1")
	guest, err := filepath.Abs(filepath.Join("..", "..", "testdata", "guests", "mcp-tool"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(policy, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, `tool "delegate" {
  module      = %q
  description = "Ask a child task to echo a text."
  input_schema = { type = "object", properties = { op = { type = "string" }, text = { type = "string" } }, required = ["op"] }
  cap "spawn" "spawner" {
    modules   = [%q]
    max_depth = 2 # the session is depth 0, the tool 1, its child 2
  }
}
`, filepath.ToSlash(guest), filepath.ToSlash(guest))
	f.Close()
	state := filepath.Join(dir, "state")
	srv := startMCPHTTP(t, policy, "--state-dir", state, "--log-level", "info")

	// mandate ui on the same state directory, its event stream open.
	ui := startUIProc(t, buildMandate(t), state)
	c := ui.client(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ui.base+"/api/events", nil)
	resp, err := (&http.Client{Jar: c.Jar}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data := make(chan string, 64)
	go func() {
		s := bufio.NewScanner(resp.Body)
		for s.Scan() {
			if d, ok := strings.CutPrefix(s.Text(), "data: "); ok {
				select {
				case data <- d:
				case <-ctx.Done():
					return
				}
			}
		}
		close(data)
	}()

	connect := func() *mcp.ClientSession {
		t.Helper()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.url}, nil)
		if err != nil {
			t.Fatalf("connect: %v\n%s", err, srv.log())
		}
		return cs
	}
	cs := connect()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "delegate", Arguments: map[string]any{"op": "delegate", "text": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := toolText(r); r.IsError || got != "child said: hi" {
		t.Fatalf("delegate: %q (error %v)\n%s", got, r.IsError, srv.log())
	}
	m := regexp.MustCompile(`session started: run=(\S+)`).FindStringSubmatch(srv.log())
	if m == nil {
		t.Fatalf("no session started in the log:\n%s", srv.log())
	}
	run := m[1]
	// The ui is told of the session's run as it starts, then as its calls
	// are recorded: while the session is live, it comes to show the tool's
	// task and the child it spawned.
	type view struct {
		Run struct {
			Ended *time.Time `json:"ended"`
		} `json:"run"`
		Tasks []struct {
			Depth int `json:"depth"`
		} `json:"tasks"`
	}
	depths := func(v view) map[int]int {
		d := map[int]int{}
		for _, tk := range v.Tasks {
			d[tk.Depth]++
		}
		return d
	}
	var v view
	for shown := false; !shown; {
		select {
		case d, ok := <-data:
			if !ok {
				t.Fatal("the ui's event stream ended")
			}
			if !strings.Contains(d, run) {
				continue
			}
			v = view{}
			ui.getJSON(t, c, "/api/runs/"+run, &v)
			d2 := depths(v)
			shown = d2[0] == 1 && d2[1] == 1 && d2[2] == 1
		case <-time.After(2 * time.Minute):
			t.Fatalf("the ui never showed the session, the tool's task and its child; last: depths %v", depths(v))
		}
	}
	if v.Run.Ended != nil {
		t.Fatalf("the session's run is shown ended at %v while it is live", v.Run.Ended)
	}
	cs.Close()

	// More sessions, each calling a tool: still one engine.
	for range 3 {
		cs := connect()
		if r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"op": "echo", "text": "x"}}); err != nil || r.IsError {
			t.Fatalf("echo: %v %v", err, r)
		}
		cs.Close()
	}
	logs := srv.stop(t)
	if n := strings.Count(logs, "session started"); n != 4 {
		t.Errorf("%d sessions started, want 4", n)
	}
	if n := strings.Count(logs, "engine started"); n != 1 {
		t.Errorf("%d engines started for 4 sessions, want 1:\n%s", n, logs)
	}
}

// toolText is a result's text content.
func toolText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
