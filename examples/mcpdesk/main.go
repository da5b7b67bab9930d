// Command mcpdesk serves Alice's desk, four tools, over the Model Context
// Protocol and plays a client's session against it, in one command:
//
//	go run ./examples/mcpdesk [-approve yes] [-state-dir DIR]
//
// It starts the fixture sites on loopback (a search site, a mail API, a
// payment provider that records every charge), runs
// `mandate mcp serve desk.hcl --http 127.0.0.1:0 --token-file FILE`, connects
// with the MCP Go SDK's client and plays the session: web_search works;
// my_benefits shows Alice her record (labelled pii:alice); then
// web_search is refused (EFLOW) and tools/list marks it unavailable;
// send_email to alice@example.com works, to anyone else it is refused
// (EDENIED: the capability's constraint); book_appointment within the
// approval threshold pays, above it is refused (EAPPROVAL), or, with
// -approve yes, pays. It prints the transcript, checks every step and
// what the fixtures received, and exits 1 when anything differs.
//
// The server is a separate process, as for a real client: this program
// itself, started again with MANDATE_MCPDESK_SERVE=1, which makes it run
// the mandate CLI (cli.Main) on its arguments (see init). So the server is
// the CLI of this very checkout, built with the same flags (go test
// -tags wasmtime serves on wasmtime), and nothing else is built
// beforehand; the tool guests are built by the server as they would be by
// an installed mandate.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mandatevm/mandate/caps/pay/paytest"
	"github.com/mandatevm/mandate/internal/cli"
	"github.com/mandatevm/mandate/internal/exampledir"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveEnv, set to 1, makes this program the mandate CLI.
const serveEnv = "MANDATE_MCPDESK_SERVE"

// The secrets the kernel holds for the tools: the card token and the mail
// API's key (desk.hcl reads them from the server's environment).
const (
	cardToken = "tok_visa_alice_4242"
	mailKey   = "mk_live_alice_8f2e61"
)

func init() {
	// In the server process, be mandate. (In init, so that the test
	// binary, started again the same way, is the CLI too.)
	if os.Getenv(serveEnv) == "1" {
		os.Unsetenv(serveEnv)
		os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
}

func main() {
	approve := flag.String("approve", "no", "the server's --approve: no denies the payment above the threshold, yes approves it")
	stateDir := flag.String("state-dir", "", "where the server records the session and keeps the data store (default: mandate's state dir)")
	flag.Parse()
	if *approve != "no" && *approve != "yes" {
		fmt.Fprintln(os.Stderr, "mcpdesk: -approve is no or yes")
		os.Exit(2)
	}
	if err := desk(context.Background(), os.Stdout, os.Stderr, *approve, *stateDir); err != nil {
		fmt.Fprintln(os.Stderr, "mcpdesk:", err)
		os.Exit(1)
	}
}

// sites are the fixture origins, recording what they receive.
type sites struct {
	mu       sync.Mutex
	searches []string // the q of every search
	mails    []mail   // what the mail API accepted
	badAuth  int      // mail requests without the key
	search   *httptest.Server
	mailAPI  *httptest.Server
	pay      *paytest.Provider
}

type mail struct {
	To, Subject, Text string
}

func startSites() *sites {
	s := &sites{}
	s.search = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query().Get("q")
		s.mu.Lock()
		s.searches = append(s.searches, q)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"q": q, "results": []map[string]string{
			{"title": "Smile Dental: cleanings from $80, crowns from $640", "url": "https://smile-dental.example/book"},
			{"title": "Choosing a dentist in your PPO network", "url": "https://health.example/ppo-dentists"},
		}})
	}))
	s.mailAPI = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/send" {
			http.NotFound(w, r)
			return
		}
		var m mail
		err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&m)
		s.mu.Lock()
		defer s.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+mailKey {
			s.badAuth++
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		if err != nil {
			http.Error(w, `{"error":"bad message"}`, http.StatusBadRequest)
			return
		}
		s.mails = append(s.mails, m)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"msg-%d","status":"queued"}`, len(s.mails))
	}))
	s.pay = paytest.NewProvider()
	s.pay.RequireInstrument(cardToken)
	return s
}

func (s *sites) close() { s.search.Close(); s.mailAPI.Close(); s.pay.Close() }

// step is one request of the session and what it must answer.
type step struct {
	tool string
	args map[string]any
	// isError: the call must be a tool error; want: what its text must
	// contain (its beginning, for an error: the errno).
	isError bool
	want    string
}

func desk(ctx context.Context, stdout, stderr io.Writer, approve, stateDir string) (err error) {
	dir, err := exampledir.Find("desk.hcl", "examples/mcpdesk")
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this program to start the server: %v", err)
	}
	s := startSites()
	defer s.close()
	tmp, err := os.MkdirTemp("", "mcpdesk-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var tok [16]byte
	rand.Read(tok[:])
	token := hex.EncodeToString(tok[:])
	tokenFile := filepath.Join(tmp, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		return err
	}

	args := []string{"mcp", "serve", filepath.Join(dir, "desk.hcl"), "--http", "127.0.0.1:0", "--token-file", tokenFile,
		"--var", "search=" + s.search.URL, "--var", "mail=" + s.mailAPI.URL, "--var", "pay=" + s.pay.URL,
		"--approve", approve, "--log-level", "warn"}
	if stateDir != "" {
		args = append(args, "--state-dir", stateDir)
	}
	fmt.Fprintf(stdout, "== mandate mcp serve desk.hcl --http 127.0.0.1:0 --token-file FILE --approve %s\n", approve)
	fmt.Fprintf(stdout, "   (search %s, mail %s, payments %s; the first run builds the tool guests)\n", s.search.URL, s.mailAPI.URL, s.pay.URL)
	// The server's log (its denials and failed tasks; every decision is
	// in its audit log too) is shown when something differs.
	log := &lockedBuffer{}
	defer func() {
		if err != nil && log.Len() > 0 {
			fmt.Fprintf(stderr, "the server's log:\n%s", log)
		}
	}()
	srv, url, err := startServer(self, args, log)
	if err != nil {
		return err
	}
	defer srv.stop()
	fmt.Fprintf(stdout, "   serving at %s\n", url)

	hc := &http.Client{Transport: bearer{token}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "mcpdesk", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err != nil {
		return fmt.Errorf("connecting to the server: %v", err)
	}
	defer cs.Close()

	p := &player{ctx: ctx, cs: cs, out: stdout}
	if err := p.list(nil); err != nil {
		return err
	}
	bookBig := step{tool: "book_appointment", args: map[string]any{"service": "crown", "slot": "2026-07-21 14:00", "price": "640.00"},
		isError: true, want: "EAPPROVAL"}
	if approve == "yes" {
		bookBig.isError, bookBig.want = false, `"amount":"640.00"`
	}
	for _, st := range []step{
		{tool: "web_search", args: map[string]any{"q": "dentist near me"}, want: "Smile Dental"},
		{tool: "my_benefits", args: map[string]any{}, want: `"dental":"Delta Plus"`},
		// The session has now seen pii:alice: the web is out of reach.
		{tool: "web_search", args: map[string]any{"q": "Gold PPO Delta Plus dentist"}, isError: true, want: "EFLOW"},
	} {
		if err := p.call(st); err != nil {
			return err
		}
	}
	if err := p.list(map[string]string{"web_search": "[unavailable in this session: EFLOW"}); err != nil {
		return err
	}
	for _, st := range []step{
		{tool: "send_email", args: map[string]any{"to": "alice@example.com", "subject": "My dental cover",
			"text": "Gold PPO, dental Delta Plus, 350 left on the deductible."}, want: `"status":"queued"`},
		{tool: "send_email", args: map[string]any{"to": "mallory@example.net", "subject": "My dental cover",
			"text": "Gold PPO, dental Delta Plus, 350 left on the deductible."}, isError: true, want: "EDENIED"},
		{tool: "book_appointment", args: map[string]any{"service": "cleaning", "slot": "2026-07-14 09:30", "price": "80.00"},
			want: `"status":"succeeded"`},
		bookBig,
	} {
		if err := p.call(st); err != nil {
			return err
		}
	}
	cs.Close()
	if err := srv.stop(); err != nil {
		return err
	}

	// The session is one run in the run store: the session task and one
	// task per call that started (the refused web_search started none).
	graphArgs := []string{"graph"}
	if stateDir != "" {
		graphArgs = append(graphArgs, "--state-dir", stateDir)
	}
	fmt.Fprintf(stdout, "\n== mandate graph (the session's run)\n")
	var graph bytes.Buffer
	if code := cli.Main(graphArgs, nil, io.MultiWriter(stdout, &graph), stderr); code != 0 {
		return fmt.Errorf("mandate graph exited %d", code)
	}
	t7 := "\n    t7  principal=alice  state=failed  " // the payment refused
	if approve == "yes" {
		t7 = "\n    t7  principal=alice  state=done  "
	}
	for _, want := range []string{"/desk.hcl at ", t7, "\n  t5 c8 call:fetch EDENIED: constraint"} {
		if !strings.Contains(graph.String(), want) {
			return fmt.Errorf("the session's graph lacks %q", strings.TrimSpace(want))
		}
	}

	// What the fixtures received.
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.searches) != 1 || s.searches[0] != "dentist near me" {
		return fmt.Errorf("the search site saw %q, want the one search before the record was read", s.searches)
	}
	if len(s.mails) != 1 || s.mails[0].To != "alice@example.com" || s.badAuth != 0 {
		return fmt.Errorf("the mail API accepted %+v (%d without the key), want one message, to alice@example.com", s.mails, s.badAuth)
	}
	wantCharges := []int64{8000}
	if approve == "yes" {
		wantCharges = append(wantCharges, 64000)
	}
	var charges []int64
	for _, c := range s.pay.Charges() {
		if c.Payee != "smile-dental.example" {
			return fmt.Errorf("a charge to %s", c.Payee)
		}
		charges = append(charges, c.AmountMinor)
	}
	if fmt.Sprint(charges) != fmt.Sprint(wantCharges) {
		return fmt.Errorf("the payment provider recorded charges %v (minor units), want %v", charges, wantCharges)
	}
	paid := "80.00 USD"
	if approve == "yes" {
		paid = "80.00 and 640.00 USD"
	}
	fmt.Fprintf(stdout, "\n== checked: one search (before the record), one email (to alice@example.com, with the key the tools never saw), %s paid to smile-dental.example\n", paid)
	return nil
}

// player plays a session's steps and prints them.
type player struct {
	ctx context.Context
	cs  *mcp.ClientSession
	out io.Writer
}

func (p *player) call(st step) error {
	a, _ := json.Marshal(st.args)
	fmt.Fprintf(p.out, "\n== tools/call %s %s\n", st.tool, a)
	r, err := p.cs.CallTool(p.ctx, &mcp.CallToolParams{Name: st.tool, Arguments: st.args})
	if err != nil {
		return fmt.Errorf("tools/call %s: %v", st.tool, err)
	}
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	text := strings.TrimSpace(b.String())
	mark := "->"
	if r.IsError {
		mark = "-> error:"
	}
	fmt.Fprintf(p.out, "   %s %s\n", mark, indent(text))
	switch {
	case r.IsError != st.isError && st.isError:
		return fmt.Errorf("tools/call %s %s: answered %q, want a tool error %s", st.tool, a, text, st.want)
	case r.IsError != st.isError:
		return fmt.Errorf("tools/call %s %s: a tool error %q, want a result with %s", st.tool, a, text, st.want)
	case st.isError && !strings.HasPrefix(text, st.want):
		return fmt.Errorf("tools/call %s %s: the error %q, want %s", st.tool, a, text, st.want)
	case !strings.Contains(text, st.want):
		return fmt.Errorf("tools/call %s %s: answered %q, want it to contain %s", st.tool, a, text, st.want)
	}
	return nil
}

// list prints tools/list; marked says which tools' descriptions must begin
// with what (the others: not with "[unavailable").
func (p *player) list(marked map[string]string) error {
	fmt.Fprintf(p.out, "\n== tools/list\n")
	res, err := p.cs.ListTools(p.ctx, nil)
	if err != nil {
		return fmt.Errorf("tools/list: %v", err)
	}
	want := []string{"book_appointment", "my_benefits", "send_email", "web_search"}
	var names []string
	for _, t := range res.Tools {
		names = append(names, t.Name)
		fmt.Fprintf(p.out, "   %-16s %s\n", t.Name, t.Description)
		if m, ok := marked[t.Name]; ok && !strings.HasPrefix(t.Description, m) {
			return fmt.Errorf("tools/list: %s is %q, want it marked %s", t.Name, t.Description, m)
		} else if !ok && strings.HasPrefix(t.Description, "[unavailable") {
			return fmt.Errorf("tools/list: %s is marked unavailable: %s", t.Name, t.Description)
		}
	}
	sort.Strings(names)
	if fmt.Sprint(names) != fmt.Sprint(want) {
		return fmt.Errorf("tools/list: %v, want %v", names, want)
	}
	return nil
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n      ") }

// server is the mandate mcp serve process.
type server struct {
	cmd      *exec.Cmd
	done     chan struct{}
	err      error // the process's exit, once done is closed
	stopOnce sync.Once
	stopErr  error
}

// startServer starts this program as "mandate ARGS" and returns once it
// serves, with the URL it serves at. Its output goes to log.
func startServer(self string, args []string, log io.Writer) (*server, string, error) {
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), serveEnv+"=1", "DESK_CARD_TOKEN="+cardToken, "DESK_MAIL_KEY="+mailKey)
	cmd.Stdout = log
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("starting the server: %v", err)
	}
	s := &server{cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		re := regexp.MustCompile(`serving MCP at (http://\S+)`)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
				continue
			}
			fmt.Fprintln(log, sc.Text())
		}
		io.Copy(io.Discard, pipe)
	}()
	go func() {
		<-copied // Wait closes the pipe: read it all first
		s.err = cmd.Wait()
		close(s.done)
	}()
	select {
	case url := <-addr:
		return s, url, nil
	case <-s.done:
		return nil, "", fmt.Errorf("mandate mcp serve exited before serving: %v", s.err)
	case <-time.After(5 * time.Minute):
		s.stop()
		return nil, "", errors.New("mandate mcp serve did not start serving within 5 minutes")
	}
}

// stop interrupts the server, which ends its sessions and records them,
// and waits for it to exit.
func (s *server) stop() error {
	s.stopOnce.Do(func() {
		if err := s.cmd.Process.Signal(os.Interrupt); err != nil {
			s.cmd.Process.Kill() // no interrupts here (Windows)
		}
		select {
		case <-s.done:
			if s.err != nil {
				s.stopErr = fmt.Errorf("mandate mcp serve: %v", s.err)
			}
		case <-time.After(30 * time.Second):
			s.cmd.Process.Kill()
			<-s.done
			s.stopErr = errors.New("mandate mcp serve did not stop within 30s of an interrupt")
		}
	})
	return s.stopErr
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

// bearer sends the server's token with every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
