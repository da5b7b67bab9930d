package mcpserve

import (
	"context"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/kernel"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestApprovalThroughTheClient: a use that needs a person's yes is asked
// through the client (elicitation), showing what the kernel will do, not
// what the model said; a no, or a client that cannot ask, is EAPPROVAL
// and nothing is sent.
func TestApprovalThroughTheClient(t *testing.T) {
	for _, c := range []struct {
		name   string
		client *mcp.ClientOptions
		sent   bool
	}{
		{"yes", &mcp.ClientOptions{ElicitationHandler: answer(true)}, true},
		{"no", &mcp.ClientOptions{ElicitationHandler: answer(false)}, false},
		{"cannot ask", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var asked []string
			client := c.client
			if client != nil {
				h := client.ElicitationHandler
				client = &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked = append(asked, r.Params.Message)
					return h(ctx, r)
				}}
			}
			f := newFixtureWith(t, fixtureOpts{
				mailApprove: "request.method == 'POST'",
				approver:    func(s *Session) kernel.Approver { return s.Approver(kernel.DenyAll) },
				client:      client,
			})
			r := f.call("send_email", map[string]any{"op": "post", "path": "/send", "body": "hello"})
			if sent := len(f.mail.Requests()) == 1; sent != c.sent || r.IsError == c.sent {
				t.Fatalf("sent=%v, isError=%v: %s", sent, r.IsError, text(r))
			}
			if !c.sent && !strings.HasPrefix(text(r), "EAPPROVAL") {
				t.Errorf("a refused approval: %s", text(r))
			}
			if client != nil && (len(asked) != 1 || !strings.Contains(asked[0], "POST") || !strings.Contains(asked[0], f.mail.URL+"/send")) {
				t.Errorf("the person was asked %q, want the kernel's account of the request", asked)
			}
		})
	}
}

func answer(yes bool) func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": yes}}, nil
	}
}
