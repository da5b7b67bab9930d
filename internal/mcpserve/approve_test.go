package mcpserve

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/mandatevm/mandate/kernel"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// person is an out-of-band approver as the pending approvals are: it
// tells the session it is asking (Asked, approval "ap1") and waits for
// the person's answer, or for the client's decline (Decline).
type person struct {
	ap      *Approvals
	mu      sync.Mutex
	asked   []kernel.ApprovalRequest
	answers chan kernel.Answer
}

func newPerson() *person {
	p := &person{answers: make(chan kernel.Answer, 1)}
	p.ap = NewApprovals(p)
	p.ap.URL = func(id string) (string, bool) { return "http://127.0.0.1:9/approvals/" + id, true }
	p.ap.Decline = func(_ context.Context, id, by string) error {
		p.answers <- kernel.Answer{Channel: kernel.ChannelClient, By: by}
		return nil
	}
	return p
}

func (p *person) Approve(ctx context.Context, r kernel.ApprovalRequest) (kernel.Answer, error) {
	p.mu.Lock()
	p.asked = append(p.asked, r)
	p.mu.Unlock()
	p.ap.Asked(ctx, "ap1", r.Text())
	select {
	case a := <-p.answers:
		return a, nil
	case <-ctx.Done():
		return kernel.Answer{}, ctx.Err()
	}
}

// elicitations records what a client was asked, and answers with action
// (and approve = true for a form).
type elicitations struct {
	mu     sync.Mutex
	params []*mcp.ElicitParams
	// then runs after each answer is decided (the person answering).
	then func()
}

func (e *elicitations) client(action string, modes ...string) *mcp.ClientOptions {
	caps := &mcp.ElicitationCapabilities{}
	for _, m := range modes {
		switch m {
		case "form":
			caps.Form = &mcp.FormElicitationCapabilities{}
		case "url":
			caps.URL = &mcp.URLElicitationCapabilities{}
		}
	}
	return &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: caps},
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			e.mu.Lock()
			e.params = append(e.params, r.Params)
			e.mu.Unlock()
			if e.then != nil {
				e.then()
			}
			return &mcp.ElicitResult{Action: action, Content: map[string]any{"approve": true}}, nil
		},
	}
}

func (e *elicitations) modes() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var m []string
	for _, p := range e.params {
		m = append(m, p.Mode)
	}
	return m
}

// TestClientCannotApprove: a client that accepts every elicitation (form
// and URL) approves nothing. It is shown where the person answers (a
// URL-mode elicitation to the approval page), never a form; the call
// waits for the person, whose no refuses it, and whose yes sends it. A
// client's decline is a no.
func TestClientCannotApprove(t *testing.T) {
	for _, c := range []struct {
		name   string
		action string
		modes  []string
		person *kernel.Answer // the person's answer, nil: none (the client's decides)
		sent   bool
		url    bool // the client was shown the approval page
	}{
		{"person says no", "accept", []string{"form", "url"}, &kernel.Answer{Channel: kernel.ChannelWeb}, false, true},
		{"person says yes", "accept", []string{"form", "url"}, &kernel.Answer{Yes: true, Channel: kernel.ChannelWeb}, true, true},
		{"client declines", "decline", []string{"url"}, nil, false, true},
		{"form-only client", "accept", []string{"form"}, &kernel.Answer{Channel: kernel.ChannelCLI}, false, false},
		{"form-only client, person says yes", "accept", []string{"form"}, &kernel.Answer{Yes: true, Channel: kernel.ChannelCLI}, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPerson()
			el := &elicitations{}
			opts := el.client(c.action, c.modes...)
			f := newFixtureWith(t, fixtureOpts{mailApprove: "request.method == 'POST'", approvals: p.ap, client: opts})
			if c.person != nil {
				if c.url {
					// The person answers once the client was shown the page.
					el.then = func() { p.answers <- *c.person }
				} else {
					p.answers <- *c.person
				}
			}
			r := f.call("send_email", map[string]any{"op": "post", "path": "/send", "body": "hello"})
			if sent := len(f.mail.Requests()) == 1; sent != c.sent || r.IsError == c.sent {
				t.Fatalf("sent=%v, isError=%v: %s", sent, r.IsError, text(r))
			}
			if !c.sent && !strings.HasPrefix(text(r), "EAPPROVAL") {
				t.Errorf("a refused approval: %s", text(r))
			}
			modes := el.modes()
			switch {
			case c.url && (len(modes) != 1 || modes[0] != "url"):
				t.Errorf("the client was shown %v, want one URL-mode elicitation", modes)
			case !c.url && len(modes) != 0:
				t.Errorf("a client that cannot show a URL was shown %v", modes)
			}
			if c.url && len(el.params) == 1 {
				if e := el.params[0]; e.URL != "http://127.0.0.1:9/approvals/ap1" || e.ElicitationID != "ap1" || !strings.Contains(e.Message, f.mail.URL+"/send") {
					t.Errorf("the URL elicitation: %+v", e)
				}
			}
			if len(p.asked) != 1 || !strings.HasPrefix(p.asked[0].Digest, "sha256:") {
				t.Errorf("the person was asked %d times: %+v", len(p.asked), p.asked)
			}
			// The audit log names the channel of the answer.
			want := "answered: no, by channel client"
			switch {
			case c.person != nil && c.person.Yes:
				want = "answered: yes, by channel " + c.person.Channel
			case c.person != nil:
				want = "answered: no, by channel " + c.person.Channel
			}
			if !f.aud.has("approve:fetch", want) {
				t.Errorf("no audit entry says %q", want)
			}
		})
	}
}

// TestClientApprovalTool: a tool whose policy says approval = "client" is
// asked by the client's form, and the audit log says the yes was the
// client's.
func TestClientApprovalTool(t *testing.T) {
	for _, yes := range []bool{true, false} {
		p := newPerson()
		el := &elicitations{}
		opts := el.client("accept", "form", "url")
		if !yes {
			opts = (&elicitations{}).client("decline", "form", "url")
		}
		f := newFixtureWith(t, fixtureOpts{mailApprove: "request.method == 'POST'", approvals: p.ap, client: opts, clientApproval: true})
		r := f.call("send_email", map[string]any{"op": "post", "path": "/send", "body": "hello"})
		if sent := len(f.mail.Requests()) == 1; sent != yes || r.IsError == yes {
			t.Fatalf("client yes=%v: sent=%v: %s", yes, sent, text(r))
		}
		if len(p.asked) != 0 {
			t.Errorf("the person was asked about a client-approved tool")
		}
		if want := "by channel client (the MCP client's form"; !f.aud.has("approve:fetch", want) {
			t.Errorf("no audit entry says %q", want)
		}
	}
}
