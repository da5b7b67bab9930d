package mcpserve

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resources and prompts of upstream servers. An upstream tool's mcp
// capability may pass some of its server's resources and prompts through
// (its grant's resources and prompts, caps/mcp): the session offers them
// to its client. They are listed when the client first asks
// (resources/list, prompts/list), and each read or get is a call on the
// session task's capability, through the kernel's pipeline like any
// other (the capability's when, uses, sink clearance, audit). What the
// client is shown, lists included (their names and descriptions are the
// upstream's text), raises the session's label and its client's, as a
// tool's result does; what is above the session's clearance is withheld.

// upstreamCap is an upstream tool's capability, as the session task
// holds it, and what it passes through.
type upstreamCap struct {
	tool, cap          string // the tool, and the session task's name for its capability
	resources, prompts bool
}

// upstreamCaps lists the capabilities of the tools that pass resources or
// prompts through.
func upstreamCaps(task *kernel.Task, tools []*Tool) []upstreamCap {
	var out []upstreamCap
	for _, t := range tools {
		if t.Upstream == "" || len(t.Caps) != 1 {
			continue
		}
		name := SessionCapName(t.Name, t.Caps[0])
		c, ok := task.CapByName(name)
		if !ok {
			continue
		}
		u := upstreamCap{tool: t.Name, cap: name}
		for _, f := range c.Kind().Describe(c.Scope()).Fields {
			switch f.Name {
			case "resources":
				u.resources = f.Value != ""
			case "prompts":
				u.prompts = f.Value != ""
			}
		}
		if u.resources || u.prompts {
			out = append(out, u)
		}
	}
	return out
}

// passThroughMiddleware lists the upstream resources and prompts before
// the client's first resources/list or prompts/list (and again after a
// failure), so that the SDK serves them as registered.
func (s *Session) passThroughMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "resources/list", "resources/templates/list", "resources/read":
			if err := s.listUpstream(ctx, true); err != nil {
				return nil, err
			}
		case "prompts/list", "prompts/get":
			if err := s.listUpstream(ctx, false); err != nil {
				return nil, err
			}
		}
		return next(ctx, method, req)
	}
}

// listUpstream registers the resources (or the prompts) of every upstream
// capability that passes them through, once.
func (s *Session) listUpstream(ctx context.Context, resources bool) error {
	s.upMu.Lock()
	defer s.upMu.Unlock()
	done := &s.promptsListed
	if resources {
		done = &s.resourcesListed
	}
	if *done {
		return nil
	}
	if err := s.Sync(ctx); err != nil {
		return err
	}
	// A capability that refuses its list (its when, its uses, its server
	// down) hides only its own: the others are offered, and the list is
	// asked again at the client's next request.
	var first error
	listed, failed := 0, 0
	for _, u := range s.upstream {
		var err error
		switch {
		case resources && u.resources:
			var list []*mcp.Resource
			if err = s.upstreamCall(ctx, u, "resources", []byte(`{}`), &list); err == nil {
				for _, r := range list {
					if r != nil && r.URI != "" {
						s.server.AddResource(r, s.readResource(u))
					}
				}
			}
		case !resources && u.prompts:
			var list []*mcp.Prompt
			if err = s.upstreamCall(ctx, u, "prompts", []byte(`{}`), &list); err == nil {
				for _, p := range list {
					if p != nil && p.Name != "" {
						s.server.AddPrompt(p, s.getPrompt(u))
					}
				}
			}
		default:
			continue
		}
		if err != nil {
			s.logger.Warn("an upstream list refused", "capability", u.cap, "error", err)
			failed++
			if first == nil {
				first = err
			}
			continue
		}
		listed++
	}
	*done = failed == 0
	if listed == 0 && first != nil {
		return first
	}
	return nil
}

func (s *Session) readResource(u upstreamCap) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		args, _ := json.Marshal(abi.MCPReadRequest{URI: req.Params.URI})
		var res mcp.ReadResourceResult
		if err := s.upstreamCall(ctx, u, "read", args, &res); err != nil {
			return nil, err
		}
		return &res, nil
	}
}

func (s *Session) getPrompt(u upstreamCap) mcp.PromptHandler {
	return func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		args, _ := json.Marshal(abi.MCPPromptRequest{Name: req.Params.Name, Arguments: req.Params.Arguments})
		var res mcp.GetPromptResult
		if err := s.upstreamCall(ctx, u, "prompt", args, &res); err != nil {
			return nil, err
		}
		return &res, nil
	}
}

// upstreamCall makes one call on the session task's capability u and
// decodes what it returns into v, once the client may be shown it (the
// session's and the client's labels raised by its label). A refusal is
// recorded as the session's and returned as the error the client is
// given.
func (s *Session) upstreamCall(ctx context.Context, u upstreamCap, op string, args []byte, v any) error {
	if err := s.Sync(ctx); err != nil {
		return err
	}
	refused := func(err error) error {
		return fmt.Errorf("%s: %v", kindapi.ErrnoOf(err), err)
	}
	h, err := s.task.Lookup(ctx, u.cap)
	if err != nil {
		return refused(err)
	}
	rh, err := s.task.Invoke(ctx, h, op, args)
	if err != nil {
		return refused(err)
	}
	defer s.task.Drop(context.WithoutCancel(ctx), rh)
	l, err := s.task.BlobLabel(rh)
	if err != nil {
		return refused(err)
	}
	if err := s.show(ctx, u.tool, l); err != nil {
		return refused(err)
	}
	n, err := s.task.BlobLen(ctx, rh)
	if err != nil {
		return refused(err)
	}
	data := make([]byte, n)
	if _, err := s.task.ReadBlob(ctx, rh, 0, data); err != nil {
		return refused(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return refused(kindapi.Errorf(abi.EIO, "the upstream's answer to %s: %v", op, err))
	}
	return nil
}

// show raises the session's label, and its client's, by l, the label of
// something the client is about to be shown because of tool: after it,
// the client's model has seen it. An error (above the session's
// clearance, or the client's label not recorded) withholds it.
func (s *Session) show(ctx context.Context, tool string, l kindapi.Label) error {
	before := s.task.Label()
	if err := s.task.Observe(l); err != nil {
		return kindapi.Errorf(abi.EFLOW, "the result is labelled %v, above what this session may be shown", l)
	}
	if s.labels != nil && !l.IsZero() {
		// The client's, for all its sessions, before the client sees it.
		if err := s.labels.Raise(context.WithoutCancel(ctx), tool, l); err != nil {
			s.logger.Error("recording what the client is shown", "tool", tool, "error", err)
			return kindapi.Errorf(abi.EINTERNAL, "the result is withheld: what the client is shown could not be recorded: %v", err)
		}
	}
	if s.task.Label().String() != before.String() {
		s.listTools() // some tools may have become unavailable
	}
	return nil
}

// upstreamValue is what a reference to an upstream tool's result stands
// for, when passed to another tool's argument: the value the tool
// returned rather than the envelope of its answer. That is its structured
// content when it has some, else the text of its one text item, each
// labelled as that part of the answer is (kindapi.Blob.PartLabel: a field
// the grant labels apart carries its own); anything else (an error, several
// items, an image) is the whole answer, as it came.
func upstreamValue(b *kindapi.Blob) *kindapi.Blob {
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
	}
	if json.Unmarshal(b.Bytes(), &r) != nil || r.IsError {
		return b
	}
	part := func(path string, data []byte) *kindapi.Blob {
		p, err := kindapi.ParsePath(path, false)
		if err != nil {
			return b
		}
		return kindapi.NewBlobOwned(data, b.PartLabel(p))
	}
	switch {
	case len(r.StructuredContent) > 0 && string(r.StructuredContent) != "null":
		return part("$.structuredContent", r.StructuredContent)
	case len(r.Content) == 1 && r.Content[0].Type == "text":
		return part("$.content[0].text", []byte(r.Content[0].Text))
	}
	return b
}
