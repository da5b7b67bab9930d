package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/runstore"
)

// mcpClientRun runs the built "mandate mcp client" with args, stdin as
// its input, and returns its stdout, stderr and exit code.
func mcpClientRun(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, buildMandate(t), append([]string{"mcp", "client"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("mandate mcp client: %v\n%s", err, &e)
	}
	return o.String(), e.String(), code
}

// TestMCPClientSession: "mandate mcp client" keeps one session over its
// commands, with a token: the session reads Alice's record, and the
// search its label now refuses is refused in the same session, the
// client going on to the next command; "session" shows the label before
// and after. A new session of the same client starts at the client's
// label. A wrong token, or none, is refused saying what the server wants.
func TestMCPClientSession(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mandate and a guest")
	}
	web := searchSite(t)
	dir, policy := mcpPolicy(t, web.URL)
	state := filepath.Join(dir, "state")
	tokenFile, tokens := mcpTokens(t, dir, "desk")
	srv := startMCPHTTP(t, policy, "--state-dir", state, "--token-file", tokenFile, "--log-level", "info")

	script := `# one session, several calls
session
call web_search {"op":"fetch","path":"/search?q=dentist"}
call my_benefits {"op":"read","owner":"alice"}
call web_search {"op":"fetch","path":"/search?q=Gold+PPO"}
call echo {"op":"echo","text":"still here"}
tools
session
`
	out, errOut, code := mcpClientRun(t, script, srv.url, "--token-file", tokenFile)
	t.Logf("mandate mcp client:\n%s", out)
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr:\n%s\nthe server's log:\n%s", code, errOut, srv.log())
	}
	ids := regexp.MustCompile(`(?m)^session (\S+)`).FindAllStringSubmatch(out, -1)
	if len(ids) != 3 || ids[0][1] != ids[1][1] || ids[1][1] != ids[2][1] {
		t.Errorf("the session ids shown: %q, want one session throughout", ids)
	}
	want := []string{
		"> session\nsession " + ids[0][1] + "\nlabel   {}/{}\n",
		"> call web_search {\"op\":\"fetch\",\"path\":\"/search?q=dentist\"}\nresults\n  (result labelled {}/{web:" + web.URL + "})\n",
		"Gold PPO",
		"(result labelled {pii:alice}/",
		"> call web_search {\"op\":\"fetch\",\"path\":\"/search?q=Gold+PPO\"}\nerror: EFLOW: its net capability \"web\" is cleared for [] and the session has seen [pii:alice]\n",
		"> call echo {\"op\":\"echo\",\"text\":\"still here\"}\nstill here\n",
		"web_search   [unavailable in this session: EFLOW:",
		"label   {pii:alice}/",
		"refuses web_search: EFLOW: its net capability \"web\" is cleared for [] and the session has seen [pii:alice]\n",
	}
	at := 0
	for _, w := range want {
		i := strings.Index(out[at:], w)
		if i < 0 {
			t.Errorf("the output lacks, in order, %q", w)
			continue
		}
		at += i + len(w)
	}
	if n := len(web.Requests()); n != 1 {
		t.Errorf("the search site saw %d requests, want the one before the record was read", n)
	}
	// The client ended its session: the server ends its task and
	// records the run then.
	for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(srv.log(), "mandate: session ended: run="); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the session did not end when the client left:\n%s", srv.log())
		}
	}

	// A new session of the client starts at the client's label (the
	// model does not forget): JSON, a command an argument after "--".
	out, errOut, code = mcpClientRun(t, "", srv.url, "--format", "json", "--token", tokens["desk"], "--",
		"session", `call web_search {"op":"fetch","path":"/search?q=x"}`, "call nosuch", "bogus")
	if code != 1 {
		t.Errorf("exit %d with an unknown tool and a bad command, want 1; stderr:\n%s", code, errOut)
	}
	var lines []struct {
		Command string          `json:"command"`
		Result  json.RawMessage `json:"result"`
		Error   string          `json:"error"`
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var v struct {
			Command string          `json:"command"`
			Result  json.RawMessage `json:"result"`
			Error   string          `json:"error"`
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("--format json: %q: %v", l, err)
		}
		lines = append(lines, v)
	}
	if len(lines) != 4 {
		t.Fatalf("--format json: %d lines, want 4:\n%s", len(lines), out)
	}
	var sess struct {
		Session string `json:"session"`
		Label   string `json:"label"`
		Refuses []struct{ Tool, Why string }
	}
	if err := json.Unmarshal(lines[0].Result, &sess); err != nil || sess.Session == "" || sess.Session == ids[0][1] ||
		!strings.HasPrefix(sess.Label, "{pii:alice}/") || len(sess.Refuses) != 1 || sess.Refuses[0].Tool != "web_search" {
		t.Errorf("a new session: %s (%v), want a new id at the client's label, web_search refused", lines[0].Result, err)
	}
	var call struct {
		IsError bool `json:"isError"`
		Content []struct{ Text string }
	}
	if err := json.Unmarshal(lines[1].Result, &call); err != nil || !call.IsError || len(call.Content) != 1 || !strings.HasPrefix(call.Content[0].Text, "EFLOW: ") {
		t.Errorf("web_search in the new session: %s (%v), want refused, EFLOW", lines[1].Result, err)
	}
	if !strings.Contains(lines[2].Error, `unknown tool "nosuch"`) || !strings.Contains(lines[3].Error, `unknown command "bogus"`) {
		t.Errorf("the bad commands: %+v %+v", lines[2], lines[3])
	}
	if n := len(web.Requests()); n != 1 {
		t.Errorf("the search site saw %d requests, want 1", n)
	}

	// A wrong token, and none: no session, and the server says why.
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"a wrong token", []string{"--token", "token-of-nobody-0123456789"}, "the bearer token is none of the server's --token-file"},
		{"no token", nil, "send Authorization: Bearer TOKEN"},
	} {
		out, errOut, code := mcpClientRun(t, "tools\n", append([]string{srv.url}, c.args...)...)
		if code != 2 || out != "" || !strings.Contains(errOut, "401 Unauthorized") || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 2 and %q", c.name, code, out, errOut, c.want)
		}
	}
	log := srv.stop(t)
	if n := strings.Count(log, "session started"); n != 2 {
		t.Errorf("%d sessions started, want the client's 2", n)
	}
	st, err := runstore.OpenReadOnly(state)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].State != "done" || runs[1].State != "done" {
		t.Errorf("runs recorded: %+v, want the 2 sessions, done", runs)
	}
}

// TestMCPHTTPNoOAuth: a server with a token file is not an OAuth server,
// and says so: its OAuth discovery addresses are 404s naming the bearer
// token, with or without one; a request without the token is a 401
// saying which token; a browser's page of another origin cannot post.
func TestMCPHTTPNoOAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mandate and a guest")
	}
	dir, policy := mcpPolicy(t, "http://127.0.0.1:1")
	tokenFile, tokens := mcpTokens(t, dir, "desk")
	srv := startMCPHTTP(t, policy, "--state-dir", filepath.Join(dir, "state"), "--token-file", tokenFile)
	base := strings.TrimSuffix(srv.url, "/")
	do := func(method, path string, header map[string]string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(hostileInitialize))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, resp.Header, b.String()
	}
	auth := map[string]string{"Authorization": "Bearer " + tokens["desk"]}
	for _, p := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp",
		"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"} {
		for _, h := range []map[string]string{nil, auth} {
			if code, _, body := do(http.MethodGet, p, h); code != http.StatusNotFound || !strings.Contains(body, "has no OAuth") {
				t.Errorf("GET %s (token %v): %d %q, want 404 saying there is no OAuth", p, h != nil, code, body)
			}
		}
	}
	code, hdr, body := do(http.MethodPost, "/mcp", nil)
	if code != http.StatusUnauthorized || hdr.Get("WWW-Authenticate") != `Bearer realm="mandate"` || !strings.Contains(body, "--token-file") {
		t.Errorf("no token: %d %q %q", code, hdr.Get("WWW-Authenticate"), body)
	}
	code, hdr, _ = do(http.MethodPost, "/mcp", map[string]string{"Authorization": "Bearer nope"})
	if code != http.StatusUnauthorized || !strings.Contains(hdr.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("a wrong token: %d %q", code, hdr.Get("WWW-Authenticate"))
	}
	crossSite := map[string]string{"Authorization": auth["Authorization"], "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}
	if code, hdr, body := do(http.MethodPost, "/mcp", crossSite); code != http.StatusForbidden || hdr.Get("Mcp-Session-Id") != "" {
		t.Errorf("a cross-site browser post: %d %q, want 403", code, body)
	}
	if code, hdr, body := do(http.MethodPost, "/mcp", auth); code != http.StatusOK || hdr.Get("Mcp-Session-Id") == "" {
		t.Errorf("with the token: %d %q, want a session", code, body)
	}
	srv.stop(t)
}

// inspector is the MCP Inspector, pinned, run by npx (it needs Node 22;
// npx brings it).
var inspector = []string{"-y", "-p", "node@22", "-p", "@modelcontextprotocol/inspector@2.12.0", "--", "mcp-inspector", "--cli"}

// TestMCPInspector: the MCP Inspector's CLI connects over HTTP with the
// token as a header, and lists and calls the tools; without it, it is
// told which token the server wants (before, the server's 401s on its
// OAuth discovery sent it into a client registration the server refused,
// never naming the token).
func TestMCPInspector(t *testing.T) {
	needNode(t)
	dir, policy := mcpPolicy(t, "http://127.0.0.1:1")
	tokenFile, tokens := mcpTokens(t, dir, "desk")
	srv := startMCPHTTP(t, policy, "--state-dir", filepath.Join(dir, "state"), "--token-file", tokenFile, "--log-level", "info")
	url := srv.url + "mcp"
	run := func(args ...string) (stdout string, stderr string, err error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npx", append(append([]string{}, inspector...), append([]string{url, "--transport", "http"}, args...)...)...)
		cmd.Dir, cmd.Env = dir, append(npmEnv(), "MCP_INSPECTOR_SECRET_STORE=memory", "HOME="+dir)
		cmd.WaitDelay = 10 * time.Second
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		start := time.Now()
		err = cmd.Run()
		t.Logf("mcp-inspector --cli %s: %v (%v)", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), err)
		return o.String(), e.String(), err
	}
	header := "Authorization: Bearer " + tokens["desk"]
	out, errOut, err := run("--header", header, "--method", "tools/list")
	var list struct{ Tools []struct{ Name string } }
	if jerr := json.Unmarshal([]byte(out), &list); err != nil || jerr != nil || len(list.Tools) != 3 {
		t.Fatalf("tools/list: %v %v:\n%s\nits stderr:\n%s\nthe server's log:\n%s", err, jerr, out, errOut, srv.log())
	}
	out, errOut, err = run("--header", header, "--method", "tools/call", "--tool-name", "echo", "--tool-arg", "op=echo", "text=hi")
	var call struct {
		Content []struct{ Text string }
	}
	if jerr := json.Unmarshal([]byte(out), &call); err != nil || jerr != nil || len(call.Content) != 1 || call.Content[0].Text != "hi" {
		t.Errorf("tools/call echo: %v %v:\n%s\nits stderr:\n%s", err, jerr, out, errOut)
	}
	// Without the token, non-interactive (no OAuth in a browser): the
	// inspector refuses, showing the server's word on the token.
	out, errOut, err = run("--stored-auth-only", "--method", "tools/list")
	if err == nil || !strings.Contains(errOut, "send Authorization: Bearer TOKEN") {
		t.Errorf("without the token, the inspector: %v\n%s\nits stderr:\n%s\nwant it refused, with the server's word on the token", err, out, errOut)
	}
	srv.stop(t)
}
