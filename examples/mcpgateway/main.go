// Command mcpgateway puts two MCP servers people already run behind
// Mandate and plays a client's session against them, in one command:
//
//	go run ./examples/mcpgateway [-state-dir DIR]
//
// It starts two stand-in upstream servers written with the MCP Go SDK: a
// files server over stdio (read_text_file, list_directory and write_file
// on a folder of Alice's, servers.go) and a public search server over
// Streamable HTTP on loopback that records every query. It runs
// `mandate check gateway.hcl --pins`, which prints each allowed upstream
// tool's definition and the digest to pin, writes the pins into a copy of
// gateway.hcl, and serves that copy with `mandate mcp serve`, over stdio,
// to the MCP Go SDK's client: web_search works; read_report returns
// Alice's report, labelled pii:alice; then web_search is refused (EFLOW)
// and tools/list marks it unavailable, and the search server received
// nothing more; read_report of a path outside reports/ is refused
// (EDENIED: the grant's when) and the files server never sees it;
// write_file is not offered. A second session runs version 2 of the files
// server, whose read_text_file's description changed: read_report is
// unavailable until it is pinned again. It prints the transcript, checks
// every step and what the servers received, and exits 1 when anything
// differs.
//
// mandate is this program itself, started again with
// MANDATE_MCPGATEWAY_SERVE=1 (see init), which runs the mandate CLI
// (cli.Main) of this very checkout; the files server is this program
// started again by mandate with the arguments serve-files DIR.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/mandatevm/mandate/internal/cli"
	"github.com/mandatevm/mandate/internal/exampledir"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/zclconf/go-cty/cty"
)

// serveEnv, set to 1, makes this program the mandate CLI.
const serveEnv = "MANDATE_MCPGATEWAY_SERVE"

// client is the MCP client the sessions belong to (mandate mcp serve
// --client): what its model was shown is kept across its sessions.
const client = "mcpgateway"

func init() {
	// In the server processes, be mandate, or the files server. (In
	// init, so that the test binary, started again the same way, is them
	// too.)
	if os.Getenv(serveEnv) == "1" {
		os.Unsetenv(serveEnv)
		os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == filesMode {
		os.Exit(serveFiles(os.Args[2:]))
	}
}

func main() {
	stateDir := flag.String("state-dir", "", "a new directory where mandate records the sessions (default: a temporary one, removed at the end)")
	flag.Parse()
	if err := gateway(context.Background(), os.Stdout, os.Stderr, *stateDir); err != nil {
		fmt.Fprintln(os.Stderr, "mcpgateway:", err)
		os.Exit(1)
	}
}

// Alice's folder, which the files server serves: her reports, and what
// is not a report.
var aliceFiles = map[string]string{
	"reports/q3-review.txt": "Q3 review, Alice Martin (confidential)\nSalary band: L5, 118,000 EUR; rating: exceeds; promotion: proposed for Q1.\n",
	"reports/q4-plan.txt":   "Q4 plan, Alice Martin\nShip the billing migration; mentor two new hires.\n",
	"private/diary.txt":     "Dear diary: the doctor called about the test results.\n",
}

// run is one run of the example: its directories and servers.
type run struct {
	ctx            context.Context
	out, errs      io.Writer
	self           string
	dir            string // the example's directory: gateway.hcl
	state          string
	alice          string // the files server's directory
	search         *searchServer
	log            *lockedBuffer // mandate's stderr, shown when something differs
	filesBefore    int           // the files server's calls before the current session
	searchesBefore int
}

func gateway(ctx context.Context, stdout, stderr io.Writer, stateDir string) (err error) {
	dir, err := exampledir.Find("gateway.hcl", "examples/mcpgateway")
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this program to start the servers: %v", err)
	}
	tmp, err := os.MkdirTemp("", "mcpgateway-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if tmp, err = filepath.EvalSymlinks(tmp); err != nil { // the paths the servers see
		return err
	}
	r := &run{ctx: ctx, out: stdout, errs: stderr, self: self, dir: dir, state: stateDir, alice: filepath.Join(tmp, "alice"), log: &lockedBuffer{}}
	if r.state == "" {
		r.state = filepath.Join(tmp, "state")
	}
	for name, text := range aliceFiles {
		p := filepath.Join(r.alice, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			return err
		}
	}
	r.search = startSearch()
	defer r.search.close()
	defer func() {
		if err != nil && r.log.Len() > 0 {
			fmt.Fprintf(stderr, "mandate's log:\n%s", r.log)
		}
	}()
	// A state directory of an earlier run remembers what the client's
	// model was shown (only a person at a terminal resets it).
	if _, err := os.Stat(filepath.Join(r.state, "mcp-clients.db")); err == nil {
		return fmt.Errorf("%s holds the MCP clients of an earlier session, whose labels it keeps: give a new -state-dir", r.state)
	}

	fmt.Fprintf(stdout, "== the upstream servers (stand-ins)\n")
	fmt.Fprintf(stdout, "   files   stdio: %s %s %s\n", filepath.Base(self), filesMode, r.alice)
	fmt.Fprintf(stdout, "           tools read_text_file, list_directory, write_file on Alice's folder (reports/, private/)\n")
	fmt.Fprintf(stdout, "   search  Streamable HTTP: %s\n", r.search.url())
	fmt.Fprintf(stdout, "           tool search, public\n")

	// The definitions, and the pins to paste.
	policy := filepath.Join(dir, "gateway.hcl")
	fmt.Fprintf(stdout, "\n== mandate check gateway.hcl --pins\n")
	var text bytes.Buffer
	code := r.mandate(&text, "check", policy, "--pins")
	fmt.Fprintf(stdout, "%s   (exit %d: not pinned yet)\n", indentAll(text.String()), code)
	if code != 1 || strings.Count(text.String(), "not pinned") != 3 {
		return fmt.Errorf("mandate check --pins of the unpinned policy: exit %d, want 1 and three tools not pinned", code)
	}
	reps, code, err := r.checkPins(policy)
	if err != nil {
		return err
	}
	if code != 1 {
		return fmt.Errorf("mandate check --pins --format json of the unpinned policy: exit %d, want 1", code)
	}
	pinned := filepath.Join(tmp, "gateway.hcl")
	if err := writePinned(policy, pinned, reps, false); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n== the pins written into a copy of gateway.hcl (the stand-ins are this program, so this\n")
	fmt.Fprintf(stdout, "   demo pins what it reads; with a real server, read the definitions above, then paste the pins)\n")
	if reps, code, err = r.checkPins(pinned); err != nil {
		return err
	}
	if err := expectStatus(reps, code, map[string]string{"read_text_file": "pinned", "list_directory": "pinned", "search": "pinned"}); err != nil {
		return err
	}
	r.printStatus(reps, code)

	// Session 1.
	fmt.Fprintf(stdout, "\n== mandate mcp serve gateway.hcl (over stdio, the client %q)\n", client)
	s, err := r.serve(pinned)
	if err != nil {
		return err
	}
	defer s.close()
	readDesc := readDescription
	if err := s.list(map[string]string{"read_report": readDesc, "list_reports": "List Alice's reports", "web_search": "Search the public web."}); err != nil {
		return err
	}
	reports := filepath.Join(r.alice, "reports")
	q3 := filepath.Join(reports, "q3-review.txt")
	diary := filepath.Join(r.alice, "private", "diary.txt")
	for _, st := range []step{
		{tool: "web_search", args: map[string]any{"q": "how to write a quarterly review"}, want: "quarterly review"},
		{tool: "list_reports", args: map[string]any{"path": reports}, want: "[FILE] q3-review.txt", label: "pii:alice"},
		{tool: "read_report", args: map[string]any{"path": q3}, want: "Salary band: L5", label: "pii:alice"},
		// The session has shown the client Alice's report: the public
		// search is out of reach.
		{tool: "web_search", args: map[string]any{"q": "L5 salary band 118,000 EUR fair?"}, isError: true, want: "EFLOW"},
	} {
		if err := s.call(st); err != nil {
			return err
		}
	}
	if err := s.list(map[string]string{"read_report": readDesc, "list_reports": "List Alice's reports",
		"web_search": "[unavailable in this session: EFLOW"}); err != nil {
		return err
	}
	for _, st := range []step{
		// Outside reports/: the grant's when refuses it, nothing is sent.
		{tool: "read_report", args: map[string]any{"path": diary}, isError: true, want: "EDENIED"},
		{tool: "read_report", args: map[string]any{"path": reports + "/../private/diary.txt"}, isError: true, want: "EDENIED"},
		// Not granted, not offered.
		{tool: "write_file", args: map[string]any{"path": q3, "content": "rating: meets"}, notOffered: true},
	} {
		if err := s.call(st); err != nil {
			return err
		}
	}
	if err := s.close(); err != nil {
		return err
	}
	if err := r.received("session 1", []fileCall{{"list_directory", map[string]any{"path": reports}}, {"read_text_file", map[string]any{"path": q3}}},
		[]string{"how to write a quarterly review"}); err != nil {
		return err
	}
	if b, err := os.ReadFile(q3); err != nil || string(b) != aliceFiles["reports/q3-review.txt"] {
		return fmt.Errorf("the report was changed: %q %v", b, err)
	}

	// Version 2 of the files server: read_text_file's description changed.
	v2 := filepath.Join(tmp, "gateway-v2.hcl")
	if err := writePinned(policy, v2, reps, true); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n== the files server is upgraded (the stand-in started with -v2); the pins are the same\n")
	fmt.Fprintf(stdout, "== mandate check gateway.hcl --pins\n")
	if reps, code, err = r.checkPins(v2); err != nil {
		return err
	}
	if err := expectStatus(reps, code, map[string]string{"read_text_file": "changed", "list_directory": "pinned", "search": "pinned"}); err != nil {
		return err
	}
	r.printStatus(reps, code)
	for _, rep := range reps {
		for _, t := range rep.Tools {
			if t.Status != "changed" {
				continue
			}
			var def struct {
				Description string `json:"description"`
			}
			json.Unmarshal(t.Definition, &def)
			fmt.Fprintf(stdout, "   %s's description is now: %s\n", t.Name, def.Description)
			if def.Description != readDescriptionV2 {
				return fmt.Errorf("check --pins shows %s's description %q, want version 2's", t.Name, def.Description)
			}
		}
	}

	fmt.Fprintf(stdout, "\n== mandate mcp serve gateway.hcl (a new session of the client %q, which keeps its label:\n", client)
	fmt.Fprintf(stdout, "   its model read Alice's report in session 1)\n")
	if s, err = r.serve(v2); err != nil {
		return err
	}
	defer s.close()
	if err := s.list(map[string]string{"read_report": "[unavailable in this session: EDENIED: the upstream definition of read_text_file is sha256:",
		"list_reports": "List Alice's reports", "web_search": "[unavailable in this session: EFLOW"}); err != nil {
		return err
	}
	for _, st := range []step{
		{tool: "read_report", args: map[string]any{"path": q3}, isError: true, want: "EDENIED"},
		{tool: "list_reports", args: map[string]any{"path": reports}, want: "[FILE] q4-plan.txt", label: "pii:alice"},
	} {
		if err := s.call(st); err != nil {
			return err
		}
	}
	if err := s.close(); err != nil {
		return err
	}
	if err := r.received("session 2", []fileCall{{"list_directory", map[string]any{"path": reports}}}, nil); err != nil {
		return err
	}

	fmt.Fprintf(stdout, "\n== checked: the search server got one query, made before the report was read; the files server\n")
	fmt.Fprintf(stdout, "   got one listing and one read of reports/ (session 1) and one listing (session 2): no path\n")
	fmt.Fprintf(stdout, "   outside reports/, no write_file, no read_text_file once its definition changed\n")
	return nil
}

// mandate runs the mandate CLI of this checkout in this process and
// returns its exit code; its standard error goes to the log.
func (r *run) mandate(stdout io.Writer, args ...string) int {
	return cli.Main(append(args, r.vars()...), nil, stdout, r.log)
}

// vars are gateway.hcl's variables: the stand-ins.
func (r *run) vars() []string {
	return []string{"--var", "files_server=" + r.self, "--var", "alice=" + r.alice, "--var", "search=" + r.search.url()}
}

// pinsReport is one capability of mandate check --pins --format json.
type pinsReport struct {
	Cap   string `json:"cap"`
	Error string `json:"error"`
	Tools []struct {
		Name       string          `json:"name"`
		Digest     string          `json:"digest"`
		Status     string          `json:"status"`
		Definition json.RawMessage `json:"definition"`
	} `json:"tools"`
}

// checkPins runs mandate check POLICY --pins --format json.
func (r *run) checkPins(policy string) ([]pinsReport, int, error) {
	var out bytes.Buffer
	code := r.mandate(&out, "check", policy, "--pins", "--format", "json")
	var reps []pinsReport
	if err := json.Unmarshal(out.Bytes(), &reps); err != nil {
		return nil, code, fmt.Errorf("mandate check --pins --format json (exit %d): %v\n%s", code, err, out.String())
	}
	return reps, code, nil
}

// expectStatus checks check --pins's reports: each capability one tool,
// with the status want gives it, and the exit code they mean.
func expectStatus(reps []pinsReport, code int, want map[string]string) error {
	got := map[string]string{}
	for _, rep := range reps {
		if rep.Error != "" || len(rep.Tools) != 1 {
			return fmt.Errorf("mandate check --pins: %s: %+v", rep.Cap, rep)
		}
		got[rep.Tools[0].Name] = rep.Tools[0].Status
	}
	wantCode := 0
	for _, s := range want {
		if s != "pinned" {
			wantCode = 1
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || code != wantCode {
		return fmt.Errorf("mandate check --pins: %v (exit %d), want %v (exit %d)", got, code, want, wantCode)
	}
	return nil
}

func (r *run) printStatus(reps []pinsReport, code int) {
	fmt.Fprintf(r.out, "   (mandate check gateway.hcl --pins --format json, exit %d)\n", code)
	for _, rep := range reps {
		for _, t := range rep.Tools {
			fmt.Fprintf(r.out, "   %-19s %-15s %s  %s\n", rep.Cap, t.Name, t.Digest, t.Status)
		}
	}
}

// writePinned writes the policy src to dst with each cap "mcp" block
// pinned as reps say (cap "TOOL.CAP", each tool's digest), as a person
// pastes the pins block mandate check prints. v2 runs version 2 of the
// files server.
func writePinned(src, dst string, reps []pinsReport, v2 bool) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if v2 {
		const cmd = `"serve-files"`
		if strings.Count(string(b), cmd) != 2 {
			return fmt.Errorf("%s: want the files server's command twice", src)
		}
		b = bytes.ReplaceAll(b, []byte(cmd), []byte(cmd+`, "-v2"`))
	}
	f, diags := hclwrite.ParseConfig(b, src, hcl.InitialPos)
	if diags.HasErrors() {
		return diags
	}
	for _, rep := range reps {
		tool, capName, ok := strings.Cut(rep.Cap, ".")
		if !ok {
			return fmt.Errorf("mandate check --pins names the capability %q", rep.Cap)
		}
		var block *hclwrite.Block
		for _, tb := range f.Body().Blocks() {
			if tb.Type() != "tool" || tb.Labels()[0] != tool {
				continue
			}
			for _, cb := range tb.Body().Blocks() {
				if l := cb.Labels(); cb.Type() == "cap" && len(l) == 2 && l[0] == "mcp" && l[1] == capName {
					block = cb
				}
			}
		}
		if block == nil {
			return fmt.Errorf("%s has no cap \"mcp\" %q in tool %q", src, capName, tool)
		}
		pins := map[string]cty.Value{}
		for _, t := range rep.Tools {
			pins[t.Name] = cty.StringVal(t.Digest)
		}
		block.Body().SetAttributeValue("pins", cty.ObjectVal(pins))
	}
	return os.WriteFile(dst, f.Bytes(), 0o600)
}

// received checks what the servers received during a session: the files
// server's calls and the search server's queries since the last check.
func (r *run) received(session string, files []fileCall, searches []string) error {
	calls, err := readCalls(r.alice)
	if err != nil {
		return err
	}
	got, _ := json.Marshal(calls[r.filesBefore:])
	want, _ := json.Marshal(files)
	if files == nil {
		want = []byte("[]")
	}
	if len(calls) == r.filesBefore {
		got = []byte("[]")
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%s: the files server received %s, want %s", session, got, want)
	}
	r.filesBefore = len(calls)
	qs := r.search.received()[r.searchesBefore:]
	if fmt.Sprint(qs) != fmt.Sprint(searches) || len(qs) != len(searches) {
		return fmt.Errorf("%s: the search server received %q, want %q", session, qs, searches)
	}
	r.searchesBefore += len(qs)
	fmt.Fprintf(r.out, "\n== what the servers received in %s\n", session)
	for _, c := range files {
		a, _ := json.Marshal(c.Args)
		fmt.Fprintf(r.out, "   files   %s %s\n", c.Tool, a)
	}
	for _, q := range searches {
		fmt.Fprintf(r.out, "   search  search %q\n", q)
	}
	if len(searches) == 0 {
		fmt.Fprintf(r.out, "   search  nothing\n")
	}
	return nil
}

// session is one mandate mcp serve process over stdio and the client's
// session with it.
type session struct {
	r    *run
	cmd  *exec.Cmd
	cs   *mcp.ClientSession
	once sync.Once
	err  error
}

// serve starts mandate mcp serve POLICY over stdio and connects to it.
func (r *run) serve(policy string) (*session, error) {
	args := append([]string{"mcp", "serve", policy, "--client", client, "--state-dir", r.state, "--log-level", "warn"}, r.vars()...)
	cmd := exec.Command(r.self, args...)
	cmd.Env = append(os.Environ(), serveEnv+"=1")
	cmd.Stderr = r.log
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "mcpgateway", Version: "1"}, nil).Connect(r.ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Minute}, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting to mandate mcp serve: %v", err)
	}
	return &session{r: r, cmd: cmd, cs: cs}, nil
}

// close ends the session: mandate records it and stops the files
// server. (Closing stdin ends mandate; the SDK signals it only if it has
// not exited a minute later.)
func (s *session) close() error {
	s.once.Do(func() {
		if err := s.cs.Close(); err != nil && !errors.Is(err, io.EOF) {
			s.err = fmt.Errorf("ending the session: %v", err)
		}
	})
	return s.err
}

// step is one tools/call and what it must answer.
type step struct {
	tool string
	args map[string]any
	// isError: the call must be a tool error; want: what its text must
	// contain (its beginning, for an error: the errno); label: what its
	// result's label must name; notOffered: the server must not know the
	// tool.
	isError    bool
	want       string
	label      string
	notOffered bool
}

func (s *session) call(st step) error {
	out := s.r.out
	a, _ := json.Marshal(st.args)
	fmt.Fprintf(out, "\n== tools/call %s %s\n", st.tool, a)
	res, err := s.cs.CallTool(s.r.ctx, &mcp.CallToolParams{Name: st.tool, Arguments: st.args})
	if st.notOffered {
		if err == nil {
			return fmt.Errorf("tools/call %s: answered, want the tool unknown", st.tool)
		}
		fmt.Fprintf(out, "   -> refused: %v\n", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("tools/call %s: %v", st.tool, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	text := strings.TrimSpace(b.String())
	mark := "->"
	if res.IsError {
		mark = "-> error:"
	}
	fmt.Fprintf(out, "   %s %s\n", mark, indent(text))
	label, _ := json.Marshal(res.Meta["mandate/label"])
	if res.Meta["mandate/label"] != nil {
		fmt.Fprintf(out, "   label %s\n", label)
	}
	switch {
	case res.IsError != st.isError && st.isError:
		return fmt.Errorf("tools/call %s %s: answered %q, want a tool error %s", st.tool, a, text, st.want)
	case res.IsError != st.isError:
		return fmt.Errorf("tools/call %s %s: a tool error %q, want a result with %s", st.tool, a, text, st.want)
	case st.isError && !strings.HasPrefix(text, st.want):
		return fmt.Errorf("tools/call %s %s: the error %q, want %s", st.tool, a, text, st.want)
	case !strings.Contains(text, st.want):
		return fmt.Errorf("tools/call %s %s: answered %q, want it to contain %s", st.tool, a, text, st.want)
	case st.label != "" && !strings.Contains(string(label), `"`+st.label+`"`):
		return fmt.Errorf("tools/call %s %s: the result is labelled %s, want %s", st.tool, a, label, st.label)
	}
	return nil
}

// list prints tools/list and checks it offers exactly the tools of want,
// each description beginning as want says.
func (s *session) list(want map[string]string) error {
	fmt.Fprintf(s.r.out, "\n== tools/list\n")
	res, err := s.cs.ListTools(s.r.ctx, nil)
	if err != nil {
		return fmt.Errorf("tools/list: %v", err)
	}
	var names, wantNames []string
	for _, t := range res.Tools {
		names = append(names, t.Name)
		fmt.Fprintf(s.r.out, "   %-12s %s\n", t.Name, indent(t.Description))
		if w, ok := want[t.Name]; ok && !strings.HasPrefix(t.Description, w) {
			return fmt.Errorf("tools/list: %s is %q, want it to begin %q", t.Name, t.Description, w)
		}
	}
	for n := range want {
		wantNames = append(wantNames, n)
	}
	sort.Strings(names)
	sort.Strings(wantNames)
	if fmt.Sprint(names) != fmt.Sprint(wantNames) {
		return fmt.Errorf("tools/list: %v, want %v", names, wantNames)
	}
	fmt.Fprintf(s.r.out, "   (write_file: not offered)\n")
	return nil
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n      ") }

// indentAll indents every line of s by three spaces.
func indentAll(s string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			b.WriteString("   " + l)
		}
	}
	return b.String()
}

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
