//go:build linux

package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mandatevm/mandate/caps/pay/paytest"
	"github.com/mandatevm/mandate/internal/approvals"
	"github.com/mandatevm/mandate/internal/webui"
	"github.com/mandatevm/mandate/runstore"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// payPolicy writes a policy with the desk's book_appointment tool: a card
// paying smile-dental.example, a person's yes above 150 USD.
func payPolicy(t *testing.T, provider string) (policy, state string) {
	t.Helper()
	dir := t.TempDir()
	book, err := filepath.Abs(filepath.Join("..", "..", "examples", "mcpdesk", "tools", "book"))
	if err != nil {
		t.Fatal(err)
	}
	policy = filepath.Join(dir, "pay.hcl")
	src := `session {
  principal = "alice"
}
tool "book_appointment" {
  module      = "` + filepath.ToSlash(book) + `"
  description = "Book a slot, paying its price."
  cap "pay" "card" {
    provider      = "` + provider + `"
    allow_private = true
    instrument    = { env = "DESK_CARD_TOKEN" }
    payees        = ["smile-dental.example"]
    currency      = "USD"
    max_amount    = "1000 USD"
    approve_above = "150 USD"
  }
}
`
	if err := os.WriteFile(policy, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return policy, filepath.Join(dir, "state")
}

// greedyClient accepts every elicitation it is shown (yes to a form),
// as a model-driven client can, and records them.
type greedyClient struct {
	mu    sync.Mutex
	shown []*mcp.ElicitParams
}

func (g *greedyClient) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{
			Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			g.mu.Lock()
			g.shown = append(g.shown, r.Params)
			g.mu.Unlock()
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
		},
	}
}

func (g *greedyClient) elicitations() []*mcp.ElicitParams {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]*mcp.ElicitParams(nil), g.shown...)
}

// pendingApproval waits for the one pending approval of state's store
// (the server writes it while the call waits).
func pendingApproval(t *testing.T, ctx context.Context, state string, stderr *bytes.Buffer) (*approvals.Store, approvals.Approval) {
	t.Helper()
	for {
		if _, err := os.Stat(filepath.Join(state, approvals.FileName)); err == nil {
			st, err := approvals.Open(state)
			if err != nil {
				t.Fatal(err)
			}
			list, err := st.List(ctx, approvals.ListOptions{Pending: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(list) == 1 {
				return st, list[0]
			}
			st.Close()
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no approval became pending\nthe server's log:\n%s", stderr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestMCPClientCannotApprove: the reproduction. With mandate mcp
// serve's default approvals, a client that accepts every elicitation
// charges nothing: it is shown only where the person answers (a URL-mode
// elicitation to mandate ui's approval page), and its accept approves
// nothing. The call waits for the person: their yes, given with
// "mandate approvals yes" at a terminal of another shell, makes exactly
// one charge of the amount shown; their no refuses the next. The run's record lists both
// answers with their channel.
func TestMCPClientCannotApprove(t *testing.T) {
	provider := paytest.NewProvider()
	t.Cleanup(provider.Close)
	policy, state := payPolicy(t, provider.URL)
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	// A mandate ui on this state directory, as far as the server can
	// tell: it offers the client the approval page's address.
	unpublish, err := webui.Publish(state, "127.0.0.1:9")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unpublish)

	cmd := exec.Command(buildMandate(t), "mcp", "serve", policy, "--state-dir", state, "--log-level", "warn")
	cmd.Env = append(os.Environ(), "MANDATE_CACHE_DIR="+testCache(), "DESK_CARD_TOKEN=tok_test")
	stderr := &bytes.Buffer{}
	cmd.Stderr = &lockedWriter{w: stderr}
	greedy := &greedyClient{}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "greedy"}, greedy.options()).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr)
	}
	defer cs.Close()

	book := func(slot, price string, answer bool) *mcp.CallToolResult {
		t.Helper()
		before := len(provider.Charges())
		done := make(chan *mcp.CallToolResult, 1)
		go func() {
			r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "book_appointment",
				Arguments: map[string]any{"service": "crown", "slot": slot, "price": price}})
			if err != nil {
				t.Errorf("call: %v", err)
			}
			done <- r
		}()
		st, a := pendingApproval(t, ctx, state, stderr)
		defer st.Close()
		if !strings.Contains(a.Request.Summary, price) || !strings.HasPrefix(a.Request.Digest, "sha256:") {
			t.Errorf("the person is asked %q (%s)", a.Request.Summary, a.Request.Digest)
		}
		// The client was shown the page and accepted: nothing happened.
		for len(greedy.elicitations()) == 0 {
			select {
			case r := <-done:
				t.Fatalf("the call ended before the person answered: %s", toolText(r))
			case <-time.After(20 * time.Millisecond):
			}
		}
		select {
		case r := <-done:
			t.Fatalf("the call ended on the client's accept: %s", toolText(r))
		case <-time.After(300 * time.Millisecond):
		}
		if n := len(provider.Charges()); n != before {
			t.Fatalf("%d charges before the person answered", n-before)
		}
		// The person answers from another shell: a yes is confirmed at
		// its terminal; a no needs none.
		if answer {
			if code, shown := answerInPTY(t, buildMandate(t), "Approve? [y/N]", "y\n", "approvals", "yes", a.ID, "--state-dir", state); code != 0 {
				t.Fatalf("mandate approvals yes: exit %d\n%s", code, shown)
			}
		} else if code, out, errOut := mandateCmd(t, buildMandate(t), "approvals", "no", a.ID, "--state-dir", state); code != 0 {
			t.Fatalf("mandate approvals no: exit %d\n%s%s", code, out, errOut)
		}
		return <-done
	}

	r := book("2026-07-21 14:00", "640.00", true)
	if r == nil || r.IsError || !strings.Contains(toolText(r), `"amount":"640.00"`) {
		t.Fatalf("the approved booking: %v\n%s", r, stderr)
	}
	r = book("2026-07-22 09:00", "999.99", false)
	if r == nil || !r.IsError || !strings.HasPrefix(toolText(r), "EAPPROVAL") {
		t.Fatalf("the refused booking: %v", r)
	}
	charges := provider.Charges()
	if len(charges) != 1 || charges[0].AmountMinor != 64000 || charges[0].Payee != "smile-dental.example" {
		t.Errorf("charges %+v, want the one 640.00 USD the person approved", charges)
	}
	for _, e := range greedy.elicitations() {
		if e.Mode != "url" || !strings.HasPrefix(e.URL, "http://127.0.0.1:9/approvals/") || e.ElicitationID == "" {
			t.Errorf("the client was shown %+v, want only URL-mode elicitations to the approval page", e)
		}
	}
	if n := len(greedy.elicitations()); n != 2 {
		t.Errorf("the client was shown %d elicitations, want one per approval", n)
	}
	cs.Close()
	cmd.Wait()

	// The session's run records both questions and their answers.
	s, err := runstore.OpenReadOnly(state)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runs, err := s.List(ctx)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs %v %v", runs, err)
	}
	rec, err := s.Get(ctx, runs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range rec.Approvals {
		got = append(got, a.Answer+" "+a.Channel)
	}
	if strings.Join(got, ", ") != "yes cli, no cli" {
		t.Errorf("the run's approvals: %v", got)
	}
}

// lockedWriter serialises writes to w (a process's stderr copied while
// the test reads it).
type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
