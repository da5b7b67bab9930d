//go:build linux

package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/internal/mcpclients"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/runstore"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestParseTokenFile: a token file names clients (CLIENT TOKEN lines, or
// one bare token: "default"); bad files are refused with the line.
func TestParseTokenFile(t *testing.T) {
	tok := strings.Repeat("t", minTokenLen)
	tests := []struct {
		name, src string
		want      []string // client names, in order
		err       string
	}{
		{"bare token", "s3cret\n", []string{defaultClient}, ""},
		{"bare token with comments", "# the desk\n\n  " + tok + "  \n", []string{defaultClient}, ""},
		{"named clients", "# clients\ndesk " + tok + "1\n\ninspector\t" + tok + "2\n", []string{"desk", "inspector"}, ""},
		{"one named client", "desk " + tok, []string{"desk"}, ""},
		{"empty", "", nil, "holds no token"},
		{"only comments", "# nothing\n\n", nil, "holds no token"},
		{"bare among named", "desk " + tok + "\n" + tok + "x\n", nil, "line 2: a bare token is allowed only as the file's one line"},
		{"pinned to a principal", "desk " + tok + " alice\n", []string{"desk"}, ""},
		{"four fields", "desk " + tok + " alice extra\n", nil, "line 1: want CLIENT TOKEN [PRINCIPAL], got 4 fields"},
		{"short token", "desk short\n", nil, "line 1: client desk's token has 5 characters, fewer than 16"},
		{"bad name", "de/sk " + tok + "\n", nil, `line 1: client name "de/sk" must be 1 to 64 of the characters`},
		{"long name", strings.Repeat("a", 65) + " " + tok + "\n", nil, "line 1: client name"},
		{"duplicate name", "desk " + tok + "1\n#\ndesk " + tok + "2\n", nil, "line 3: client desk is named twice (first on line 1)"},
		{"duplicate token", "desk " + tok + "\nother " + tok + "\n", nil, "line 2: client other has the token of line 1"},
		{"control character", "desk " + tok + "\x01\n", nil, "line 1: client desk's token holds the character"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseTokenFile([]byte(tc.src))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, c := range got {
				names = append(names, c.client)
			}
			if strings.Join(names, ",") != strings.Join(tc.want, ",") {
				t.Errorf("clients %q, want %q", names, tc.want)
			}
		})
	}
	// Each request names its client by its token, and only a token of the
	// file does.
	clients, err := parseTokenFile([]byte("desk " + tok + "1\ninspector " + tok + "2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if clients[1].token != sha256.Sum256([]byte(tok+"2")) {
		t.Fatal("the token is not kept as its digest")
	}
	for _, c := range []struct{ header, want string }{
		{"Bearer " + tok + "1", "desk"}, {"Bearer " + tok + "2", "inspector"}, {"Bearer " + tok, ""}, {tok + "1", ""}, {"", ""},
	} {
		r := httptest.NewRequest("POST", "/", nil)
		r.Header.Set("Authorization", c.header)
		if got, ok := clientOf(clients, r); got != c.want || ok != (c.want != "") {
			t.Errorf("Authorization %q: client %q %v, want %q", c.header, got, ok, c.want)
		}
	}
}

// mcpTokens writes a token file naming clients and returns it, with each
// client's token.
func mcpTokens(t *testing.T, dir string, clients ...string) (string, map[string]string) {
	t.Helper()
	tokens := map[string]string{}
	var b strings.Builder
	for _, c := range clients {
		tokens[c] = "token-of-" + c + "-0123456789"
		fmt.Fprintf(&b, "%s %s\n", c, tokens[c])
	}
	path := filepath.Join(dir, "tokens")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, tokens
}

// mcpConnect connects a client with token (none when "") to url.
func mcpConnect(t *testing.T, url, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: url}
	if token != "" {
		tr.HTTPClient = &http.Client{Transport: bearer{token}}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, opts).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return cs
}

// callTool calls a tool and returns its text and whether it is an error.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return toolText(r), r.IsError
}

// webSearchUnavailable reports whether cs's tools/list marks web_search
// unavailable.
func webSearchUnavailable(t *testing.T, cs *mcp.ClientSession) bool {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		if tl.Name == "web_search" {
			return strings.HasPrefix(tl.Description, "[unavailable in this session: EFLOW")
		}
	}
	t.Fatal("web_search is not listed")
	return false
}

var (
	readAliceRecord = map[string]any{"op": "read", "owner": "alice"}
	searchPlan      = map[string]any{"op": "fetch", "path": "/search?q=Gold+PPO"}
)

// TestMCPClientLabel: what a client has read stays with the client
// (issue 26). Over HTTP with named clients: a session of A reads Alice's
// record and ends; A's next session is refused web_search (EFLOW) and the
// search site receives nothing. Two live sessions of C: once one reads
// the record, the other's tools/list changes at once and its web_search
// is refused. B is not affected. After a restart of mandate mcp serve on
// the same state directory, A is still refused; "mandate mcp reset A" at
// a terminal lets A's next session search again, recorded in the
// client's history and the audit log; without a terminal, the reset is
// refused and nothing changes. Every session ended by its client is
// recorded done, and nothing is logged as an error.
func TestMCPClientLabel(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mandate and a guest")
	}
	web := searchSite(t)
	dir, policy := mcpPolicy(t, web.URL)
	state := filepath.Join(dir, "state")
	tokenFile, tokens := mcpTokens(t, dir, "A", "B", "C")
	srv := startMCPHTTP(t, policy, "--state-dir", state, "--token-file", tokenFile, "--log-level", "info")

	// A reads the record, and leaves.
	a1 := mcpConnect(t, srv.url, tokens["A"], nil)
	if out, isErr := callTool(t, a1, "my_benefits", readAliceRecord); isErr || !strings.Contains(out, "Gold PPO") {
		t.Fatalf("my_benefits: %q", out)
	}
	a1.Close()
	// A's next session.
	a2 := mcpConnect(t, srv.url, tokens["A"], nil)
	if !webSearchUnavailable(t, a2) {
		t.Errorf("A's second session lists web_search as available")
	}
	if out, isErr := callTool(t, a2, "web_search", searchPlan); !isErr || !strings.HasPrefix(out, "EFLOW") {
		t.Errorf("web_search in A's second session: %v %q", isErr, out)
	}
	a2.Close()
	if n := len(web.Requests()); n != 0 {
		t.Fatalf("the search site received %d requests", n)
	}

	// Two live sessions of C: the second is told when the first reads.
	changed := make(chan struct{}, 8)
	c2opts := &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}}
	c1 := mcpConnect(t, srv.url, tokens["C"], nil)
	c2 := mcpConnect(t, srv.url, tokens["C"], c2opts)
	if webSearchUnavailable(t, c2) {
		t.Fatal("C's second session lists web_search unavailable before anything was read")
	}
	if out, isErr := callTool(t, c1, "my_benefits", readAliceRecord); isErr || !strings.Contains(out, "Gold PPO") {
		t.Fatalf("my_benefits in C's first session: %q", out)
	}
	select {
	case <-changed:
	case <-time.After(time.Minute):
		t.Fatalf("C's second session was not told its tools changed\n%s", srv.log())
	}
	if !webSearchUnavailable(t, c2) {
		t.Errorf("C's second session lists web_search as available after the first read the record")
	}
	if out, isErr := callTool(t, c2, "web_search", searchPlan); !isErr || !strings.HasPrefix(out, "EFLOW") {
		t.Errorf("web_search in C's second session: %v %q", isErr, out)
	}
	c1.Close()
	c2.Close()

	// B is another client.
	b := mcpConnect(t, srv.url, tokens["B"], nil)
	if out, isErr := callTool(t, b, "web_search", map[string]any{"op": "fetch", "path": "/search?q=dentist"}); isErr || out != "results" {
		t.Errorf("web_search for B: %v %q", isErr, out)
	}
	b.Close()
	if n := len(web.Requests()); n != 1 {
		t.Fatalf("the search site received %d requests, want B's one", n)
	}
	logs := srv.stop(t)

	// A restart on the same state directory: A is still labelled.
	srv = startMCPHTTP(t, policy, "--state-dir", state, "--token-file", tokenFile, "--log-level", "info")
	a3 := mcpConnect(t, srv.url, tokens["A"], nil)
	if out, isErr := callTool(t, a3, "web_search", searchPlan); !isErr || !strings.HasPrefix(out, "EFLOW") {
		t.Errorf("web_search for A after a restart: %v %q", isErr, out)
	}
	a3.Close()

	// Without a terminal, the reset is refused and nothing changes.
	code, out, errOut := mandateCmd(t, buildMandate(t), "mcp", "reset", "A", "--reason", "a model asked", "--state-dir", state)
	if code == 0 || !strings.Contains(out+errOut, "no terminal to confirm on") {
		t.Errorf("a reset without a terminal: exit %d\n%s%s", code, out, errOut)
	}
	st, err := mcpclients.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	if l, err := st.Label(ctx, "A"); err != nil || l.Label.IsZero() {
		t.Fatalf("A's label after a refused reset: %v %v", l.Label, err)
	}

	// At a terminal, confirmed: A's next session searches again.
	code, out2 := answerInPTY(t, buildMandate(t), "Type the client's name to confirm: ", "A\n",
		"mcp", "reset", "A", "--reason", "a new task", "--state-dir", state)
	if code != 0 || !strings.Contains(out2, `The label of MCP client "A" is reset (it was {pii:alice}/`) ||
		!strings.Contains(out2, "a session live now keeps its label until it ends") {
		t.Fatalf("mandate mcp reset at a terminal: exit %d\n%s", code, out2)
	}
	a4 := mcpConnect(t, srv.url, tokens["A"], nil)
	if out, isErr := callTool(t, a4, "web_search", map[string]any{"op": "fetch", "path": "/search?q=dentist"}); isErr || out != "results" {
		t.Errorf("web_search for A after the reset: %v %q", isErr, out)
	}
	a4.Close()
	// C was not reset.
	c3 := mcpConnect(t, srv.url, tokens["C"], nil)
	if out, isErr := callTool(t, c3, "web_search", searchPlan); !isErr || !strings.HasPrefix(out, "EFLOW") {
		t.Errorf("web_search for C after A's reset: %v %q", isErr, out)
	}
	c3.Close()
	logs += srv.stop(t)

	h, err := st.History(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	// The record's raise, the reset, then the search's result (its taint).
	if len(h) != 3 || h[0].Event != mcpclients.EventRaise || h[0].Tool != "my_benefits" || h[1].Event != mcpclients.EventReset ||
		h[1].Why != "a new task" || !strings.Contains(h[1].By, "uid ") || !strings.Contains(h[1].By, "/dev/pts/") || h[2].Tool != "web_search" {
		t.Errorf("A's history: %+v", h)
	}
	alog, err := audit.OpenReadOnly(filepath.Join(state, "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer alog.Close()
	entries, err := alog.Entries(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	resets := 0
	for _, e := range entries {
		if e.Op == "reset-label" {
			resets++
			if !strings.Contains(e.Reason, `MCP client "A"`) || !strings.Contains(e.Reason, "a new task") || e.Principal != h[1].By {
				t.Errorf("the audit entry of the reset: %+v", e)
			}
		}
	}
	if resets != 1 {
		t.Errorf("%d resets in the audit log, want 1", resets)
	}

	// Every session ended by its client: done, and no error logged.
	rs, err := runstore.OpenReadOnly(state)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	runs, err := rs.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 8 {
		t.Errorf("%d runs, want the 8 sessions", len(runs))
	}
	for _, r := range runs {
		if r.State != "done" || !strings.HasPrefix(r.Module, "mcp:") {
			t.Errorf("session %s: %s, module %q; want done, mcp:CLIENT", r.ID, r.State, r.Module)
		}
	}
	if strings.Contains(logs, "[ERROR]") {
		t.Errorf("the server logged an error:\n%s", logs)
	}
}

// TestMCPClientLabelStdio: over stdio the client is --client: a client
// that starts one server per call (as the MCP Inspector's CLI does)
// keeps its label from one to the next; another client does not share it.
func TestMCPClientLabelStdio(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mandate and a guest")
	}
	web := searchSite(t)
	dir, policy := mcpPolicy(t, web.URL)
	state := filepath.Join(dir, "state")
	once := func(client, tool string, args map[string]any) (string, bool) {
		t.Helper()
		cmd := exec.Command(buildMandate(t), "mcp", "serve", policy, "--state-dir", state, "--client", client, "--log-level", "warn")
		cmd.Env = append(os.Environ(), "MANDATE_CACHE_DIR="+testCache())
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "inspector-cli"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("connect: %v\n%s", err, &stderr)
		}
		out, isErr := callTool(t, cs, tool, args)
		cs.Close()
		if strings.Contains(stderr.String(), "[ERROR]") {
			t.Errorf("the server logged an error:\n%s", &stderr)
		}
		return out, isErr
	}
	if out, isErr := once("inspector", "my_benefits", readAliceRecord); isErr || !strings.Contains(out, "Gold PPO") {
		t.Fatalf("my_benefits: %q", out)
	}
	if out, isErr := once("inspector", "web_search", searchPlan); !isErr || !strings.HasPrefix(out, "EFLOW") {
		t.Errorf("web_search in the inspector's next server: %v %q", isErr, out)
	}
	if out, isErr := once("stdio-other", "web_search", map[string]any{"op": "fetch", "path": "/search?q=dentist"}); isErr || out != "results" {
		t.Errorf("web_search for another client: %v %q", isErr, out)
	}
	if n := len(web.Requests()); n != 1 {
		t.Errorf("the search site received %d requests, want the other client's one", n)
	}
}

// TestMCPClientLabelTTL: with label_ttl, a client's label last raised
// longer ago than that is dropped when its next session starts (and the
// expiry recorded); one raised within it is kept. Without a token file
// every HTTP session is the client "local".
func TestMCPClientLabelTTL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mandate and a guest")
	}
	web := searchSite(t)
	dir, policy := mcpPolicy(t, web.URL)
	src, err := os.ReadFile(policy)
	if err != nil {
		t.Fatal(err)
	}
	withTTL := strings.Replace(string(src), "  clearance = [\"pii:alice\"]\n", "  clearance = [\"pii:alice\"]\n  label_ttl = \"1h\"\n", 1)
	if withTTL == string(src) {
		t.Fatal("the policy has no clearance line to add label_ttl after")
	}
	if err := os.WriteFile(policy, []byte(withTTL), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	ctx := context.Background()
	st, err := mcpclients.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	alice := kindapi.NewLabel([]string{"pii:alice"}, nil)
	if _, err := st.Raise(ctx, localClient, mcpclients.Raise{Time: time.Now().Add(-2 * time.Hour), Run: "earlier", Tool: "my_benefits", Label: alice}); err != nil {
		t.Fatal(err)
	}
	srv := startMCPHTTP(t, policy, "--state-dir", state, "--log-level", "info")
	cs := mcpConnect(t, srv.url, "", nil)
	if out, isErr := callTool(t, cs, "web_search", map[string]any{"op": "fetch", "path": "/search?q=dentist"}); isErr || out != "results" {
		t.Errorf("web_search after the label expired: %v %q", isErr, out)
	}
	cs.Close()
	h, err := st.History(ctx, localClient)
	if err != nil {
		t.Fatal(err)
	}
	// (then the search's result: its taint)
	if len(h) < 2 || h[1].Event != mcpclients.EventExpiry || h[1].Label.String() != alice.String() {
		t.Errorf("the history: %+v, want the raise and its expiry first", h)
	}
	// Raised within the ttl: kept.
	if _, err := st.Raise(ctx, localClient, mcpclients.Raise{Time: time.Now().Add(-30 * time.Minute), Label: alice}); err != nil {
		t.Fatal(err)
	}
	cs = mcpConnect(t, srv.url, "", nil)
	if out, isErr := callTool(t, cs, "web_search", searchPlan); !isErr || !strings.HasPrefix(out, "EFLOW") {
		t.Errorf("web_search with a label within its ttl: %v %q", isErr, out)
	}
	cs.Close()
	srv.stop(t)
}

// TestMCPSessionLimit: past maxMCPSessions live, a new session is
// answered a JSON-RPC error that says why; the client is shown it.
func TestMCPSessionLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a guest")
	}
	dir, policy := mcpPolicy(t, "http://127.0.0.1:1")
	h := startHostileHTTPPolicy(t, dir, policy, "info")
	for i := range maxMCPSessions {
		if code, sid, body, _ := h.post(t, "", []byte(hostileInitialize)); code != http.StatusOK || sid == "" {
			t.Fatalf("session %d: %d %q %.200s", i+1, code, sid, body)
		}
	}
	code, sid, body, msgs := h.post(t, "", []byte(hostileInitialize))
	want := fmt.Sprintf("too many sessions: at most %d live at once; end one or wait for an idle one to time out after %v", maxMCPSessions, mcpIdleTimeout)
	if code != http.StatusOK || sid != "" || len(msgs) != 1 || msgs[0].Error == nil || msgs[0].Error.Message != want || string(msgs[0].ID) != "1" {
		t.Fatalf("session %d: %d %q %s", maxMCPSessions+1, code, sid, body)
	}
	// A client is shown the message.
	_, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: h.url, HTTPClient: &http.Client{Transport: bearer{h.token}}}, nil)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a client's session past the limit: %v", err)
	}
	h.stop()
	if n := strings.Count(h.logs(), "session started"); n != maxMCPSessions {
		t.Errorf("%d sessions started, want %d", n, maxMCPSessions)
	}
}

// TestMCPClientPinned: a token line may pin its client to a principal;
// a server whose policy acts for another refuses the client's sessions,
// saying why, and serves the client pinned to its own principal.
func TestMCPClientPinned(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mandate and a guest")
	}
	dir, policy := mcpPolicy(t, "http://127.0.0.1:1")
	alice, bob := "token-of-alice-0123456789", "token-of-bob-0123456789"
	tokenFile := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokenFile, []byte("alice-desk "+alice+" alice\nbob-desk "+bob+" bob\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startMCPHTTP(t, policy, "--state-dir", filepath.Join(dir, "state"), "--token-file", tokenFile, "--log-level", "info")
	cs := mcpConnect(t, srv.url, alice, nil)
	if out, isErr := callTool(t, cs, "echo", map[string]any{"op": "echo", "text": "hi"}); isErr || out != "hi" {
		t.Errorf("the client pinned to alice, on alice's policy: %v %q", isErr, out)
	}
	cs.Close()
	_, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: srv.url, HTTPClient: &http.Client{Transport: bearer{bob}}}, nil)
	if want := "client bob-desk may act only for bob, and this server's policy acts for alice"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("the client pinned to bob, on alice's policy: %v", err)
	}
}
