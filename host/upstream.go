package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mandatevm/mandate/caps/mcp"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/manifest"
	"github.com/mandatevm/mandate/sandbox"
)

// Upstream tools. A policy's tool may be a tool of an MCP server people
// already run (manifest.Tool.Upstream): it has no module, and its one
// capability is of kind mcp (caps/mcp), a client of that server. Each call
// of it is still a task, a child of the session task holding exactly that
// capability, as a module's tool's call is (so approvals, cancelling,
// effects, the graph and the audit log treat it the same): a task whose
// module is UpstreamModule, which makes one call on the capability with
// the call's arguments and returns its answer unread.

// UpstreamModule is the module of an upstream tool's call. It runs no
// WebAssembly: it is the host's own code, and makes its one call through
// the kernel (kernel.TaskOf) on its task's table only, as a guest would.
type UpstreamModule struct {
	// Cap is the mcp capability's name in the task's table.
	Cap string
	// Tool is the upstream tool's name.
	Tool string
	// Def is the digest of the upstream tool's definition that the
	// capability pins: the module's digest, which runs and the graph name.
	Def string
}

var _ sandbox.Module = UpstreamModule{}

// Digest is the pinned definition's digest, "" when there is none.
func (m UpstreamModule) Digest() string { return m.Def }

// Kind is Command: each call runs once.
func (UpstreamModule) Kind() sandbox.ModuleKind { return sandbox.Command }

// Close does nothing.
func (UpstreamModule) Close(context.Context) error { return nil }

// Run calls the upstream tool with the task's input, the call's
// arguments, as arguments, and makes the answer (the upstream's
// CallToolResult, as JSON) the task's result without reading it: the
// task's label is not raised by what it returns. A value the session put
// in the arguments by reference ({"mandate_blob": HANDLE}) is spliced
// into the call unread. cfg.Timeout bounds the call.
func (m UpstreamModule) Run(ctx context.Context, cfg sandbox.RunConfig) error {
	t := kernel.TaskOf(ctx)
	if t == nil {
		return errors.New("host: an upstream tool's call runs only as a kernel task")
	}
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	res, err := m.call(ctx, t)
	switch {
	case err == nil:
		return t.SetResult(ctx, res)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return sandbox.ErrTimeout
	case ctx.Err() != nil:
		return sandbox.ErrCanceled
	}
	return err
}

func (m UpstreamModule) call(ctx context.Context, t *kernel.Task) (abi.Handle, error) {
	h, err := t.Lookup(ctx, m.Cap)
	if err != nil {
		return 0, err
	}
	in, err := t.InputHandle(ctx)
	if err != nil {
		return 0, err
	}
	n, err := t.BlobLen(ctx, in)
	if err != nil {
		return 0, err
	}
	args := make([]byte, n)
	if _, err := t.ReadBlob(ctx, in, 0, args); err != nil {
		return 0, err
	}
	req, err := UpstreamCall(m.Tool, args)
	if err != nil {
		return 0, err
	}
	return t.Invoke(ctx, h, "call", req)
}

// UpstreamCall is the mcp capability's call request for tool with the
// arguments args (a JSON object): every {"mandate_blob": HANDLE} in them
// (what a session puts where the client passed a reference) becomes a
// splice placeholder, the blob spliced there by the kernel, unread.
func UpstreamCall(tool string, args []byte) ([]byte, error) {
	var v any
	if len(args) == 0 {
		v = map[string]any{}
	} else if err := json.Unmarshal(args, &v); err != nil {
		return nil, kindapi.Errorf(abi.EINVAL, "the arguments are not JSON: %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, kindapi.Errorf(abi.EINVAL, "the arguments are not a JSON object")
	}
	var splice []abi.Handle
	v, err := spliceRefs(v, &splice, 0)
	if err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		Tool      string       `json:"tool"`
		Arguments any          `json:"arguments"`
		Splice    []abi.Handle `json:"splice,omitempty"`
	}{tool, v, splice})
}

// spliceRefs replaces each {"mandate_blob": N} of v by a splice
// placeholder for handle N.
func spliceRefs(v any, splice *[]abi.Handle, depth int) (any, error) {
	if depth > abi.MaxJSONDepth {
		return nil, kindapi.Errorf(abi.EINVAL, "the arguments nest deeper than %d", abi.MaxJSONDepth)
	}
	switch x := v.(type) {
	case map[string]any:
		if h, ok := x["mandate_blob"].(float64); ok && len(x) == 1 {
			if h < 0 || h != float64(uint32(h)) {
				return nil, kindapi.Errorf(abi.EINVAL, "mandate_blob %v is not a handle", h)
			}
			if len(*splice) >= abi.MaxSplice {
				return nil, kindapi.Errorf(abi.ELIMIT, "more than %d references in the arguments", abi.MaxSplice)
			}
			*splice = append(*splice, abi.Handle(uint32(h)))
			return abi.SplicePlaceholder(len(*splice) - 1), nil
		}
		for k, e := range x {
			r, err := spliceRefs(e, splice, depth+1)
			if err != nil {
				return nil, err
			}
			x[k] = r
		}
	case []any:
		for i, e := range x {
			r, err := spliceRefs(e, splice, depth+1)
			if err != nil {
				return nil, err
			}
			x[i] = r
		}
	}
	return v, nil
}

// upstreamDef is what a session reads of an upstream tool's pinned
// definition.
type upstreamDef struct {
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// readUpstreamDef reads the description and input schema of a pinned
// definition; the schema must be a JSON object.
func readUpstreamDef(def json.RawMessage) (upstreamDef, error) {
	var d upstreamDef
	if err := json.Unmarshal(def, &d); err != nil {
		return d, fmt.Errorf("its definition: %v", err)
	}
	var schema map[string]any
	if json.Unmarshal(d.InputSchema, &schema) != nil || schema == nil {
		d.InputSchema = json.RawMessage(`{"type":"object"}`)
	}
	d.Description = kindapi.EscapeText(d.Description)
	return d, nil
}

// upstreamTool makes an upstream tool of a session: its one mcp
// capability granted, and its definition read from the upstream server
// and checked against the capability's pin. A tool whose definition does
// not match the pin, or whose server cannot be reached, is offered as
// unavailable with why (its calls are refused by the capability before
// anything is sent); a grant that does not allow the tool at all is an
// error of the policy.
func (r *Run) upstreamTool(ctx context.Context, t *manifest.Tool) (SessionTool, []kernel.GrantSpec, error) {
	gs, err := t.Grants(r.k)
	if err != nil {
		return SessionTool{}, nil, err
	}
	g := gs[0] // manifest: exactly one cap, of kind mcp
	tool := SessionTool{Name: t.Name, Description: t.Description, InputSchema: json.RawMessage(`{"type":"object"}`),
		ByReference: t.Result == manifest.ResultReference, Limits: t.Limits(), Caps: []string{g.Name},
		ClientApproval: t.Approval == manifest.ApprovalClient, Upstream: t.Upstream}
	mod := UpstreamModule{Cap: g.Name, Tool: t.Upstream}
	g.Name = SessionCapName(t.Name, g.Name)
	kind, ok := r.k.Kind(mcp.KindName)
	mk, isMCP := kind.(*mcp.Kind)
	if !ok || !isMCP {
		return SessionTool{}, nil, t.Error(errors.New("the kernel has no mcp kind"))
	}
	defs, err := mk.Definitions(ctx, g.Scope)
	var def *mcp.Definition
	for i := range defs {
		if defs[i].Name == t.Upstream {
			def = &defs[i]
		}
	}
	switch {
	case err != nil:
		tool.Unavailable = fmt.Sprintf("its server's tools could not be listed: %v", err)
	case def == nil:
		names := make([]string, len(defs))
		for i, d := range defs {
			names[i] = d.Name
		}
		return SessionTool{}, nil, t.Error(fmt.Errorf("the upstream tool %q is not one its capability %q allows and the server offers (those are: %s)",
			t.Upstream, tool.Caps[0], strings.Join(names, ", ")))
	case !def.Pinned():
		pin := "no pin"
		if def.Pin != "" {
			pin = "the pin " + def.Pin
		}
		tool.Unavailable = fmt.Sprintf("the upstream definition of %s is %s, not %s: read it and pin it (mandate check prints it)", t.Upstream, def.Digest, pin)
	default:
		d, err := readUpstreamDef(def.Def)
		if err != nil {
			tool.Unavailable = err.Error()
			break
		}
		mod.Def = def.Digest
		tool.InputSchema = d.InputSchema
		if tool.Description == "" {
			tool.Description = d.Description
		}
	}
	if mod.Def == "" {
		mod.Def = sandbox.IdleModule{}.Digest()
	}
	tool.Module = mod
	r.logger.Info("upstream tool", "tool", t.Name, "upstream", t.Upstream, "definition", mod.Def, "unavailable", tool.Unavailable)
	return tool, []kernel.GrantSpec{g}, nil
}
