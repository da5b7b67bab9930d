package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Prepare prepares one operation. It decodes the arguments once, checks
// them against the scope (the tool, resource or prompt allowed; sizes;
// splices) and, when the server's tool list is already known, the tool's
// pin. It has no side effect: nothing connects and no process starts
// before the kernel runs the Effect.
func (k *Kind) Prepare(call *kindapi.Call) (kindapi.Op, error) {
	s, err := kindapi.ScopeAs[*Scope](call.Scope, KindName)
	if err != nil {
		return kindapi.Op{}, err
	}
	switch call.Op {
	case OpCall:
		return k.prepareCall(call, s)
	case OpTools, OpResources, OpPrompts:
		return k.prepareList(call, s)
	case OpRead:
		return k.prepareRead(call, s)
	case OpPrompt:
		return k.preparePrompt(call, s)
	}
	return kindapi.Op{}, kindapi.Errorf(abi.ENOTSUP, "mcp: no operation %q", call.Op)
}

// decodeErr is the errno of an argument document that did not decode.
func decodeErr(what string, err error) error {
	if errors.Is(err, abi.ErrTooLarge) {
		return kindapi.Errorf(abi.ELIMIT, "%s: %v", what, err)
	}
	return kindapi.Errorf(abi.EINVAL, "%s: %v", what, err)
}

// toolCall is a prepared call.
type toolCall struct {
	k       *Kind
	s       *Scope
	tool    string
	args    []byte // what is sent: the arguments with the splices in
	written string // the arguments as the task wrote them
	spliced []kindapi.Label
	amount  int64
	prov    map[string]kindapi.Source
}

func (k *Kind) prepareCall(call *kindapi.Call, s *Scope) (kindapi.Op, error) {
	const what = "mcp: call"
	if int64(len(call.Args)) > s.maxRequest {
		return kindapi.Op{}, kindapi.Errorf(abi.ELIMIT, "%s: the request is %d bytes (max_request_bytes %d)", what, len(call.Args), s.maxRequest)
	}
	r, err := abi.DecodeMCPCallRequest(call.Args)
	if err != nil {
		return kindapi.Op{}, decodeErr(what, err)
	}
	if !s.AllowsTool(r.Tool) {
		return kindapi.Op{}, kindapi.Errorf(abi.EDENIED, "%s: tool %s is not granted (the capability allows %s)", what, kindapi.QuoteTrunc(r.Tool), strings.Join(s.tools, ", "))
	}
	// The pin, when the server's tools are known: refused here, nothing
	// is sent. The Effect checks it again against the current list.
	if d, listed, known := k.known(s).cachedDef(r.Tool); known && listed {
		if err := s.checkPin(what, r.Tool, d.digest); err != nil {
			return kindapi.Op{}, err
		}
	}
	c := &toolCall{k: k, s: s, tool: r.Tool, amount: s.cost(r.Tool)}
	raw := r.Arguments
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return kindapi.Op{}, kindapi.Errorf(abi.EINVAL, "%s: arguments: %v", what, err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return kindapi.Op{}, kindapi.Errorf(abi.EINVAL, "%s: arguments must be a JSON object", what)
	}
	if w, err := canonical(obj); err == nil {
		c.written = markSpliced(string(w))
	}
	if err := c.splice(call, &r, obj); err != nil {
		return kindapi.Op{}, err
	}
	if c.args, err = canonical(obj); err != nil {
		return kindapi.Op{}, kindapi.Errorf(abi.EINTERNAL, "%s: writing the arguments: %v", what, err)
	}
	if int64(len(c.args)) > s.maxRequest {
		return kindapi.Op{}, kindapi.Errorf(abi.ELIMIT, "%s: the arguments are %d bytes with their splices (max_request_bytes %d)", what, len(c.args), s.maxRequest)
	}
	return kindapi.Op{
		Sink:       s.refusal.Sink(s.clearance),
		Vars:       c.vars,
		Show:       c.show,
		Amount:     c.amount,
		Effect:     c.run,
		Account:    c.account,
		Provenance: c.prov,
	}, nil
}

// splice puts the spliced blobs and parts into the arguments: a whole
// blob's text where a string holds its placeholder, a part's JSON value
// in place of a string that is exactly its placeholder.
func (c *toolCall) splice(call *kindapi.Call, r *abi.MCPCallRequest, obj map[string]any) error {
	const what = "mcp: call"
	if len(r.Splice) == 0 && len(r.SpliceParts) == 0 {
		return nil
	}
	vals := make([][]byte, len(r.Splice))
	var total int64
	for i, h := range r.Splice {
		b, err := call.Blob(h)
		if err != nil {
			return err
		}
		if total += int64(b.Len()); total > c.s.maxRequest {
			return kindapi.Errorf(abi.ELIMIT, "%s: spliced blobs exceed max_request_bytes %d", what, c.s.maxRequest)
		}
		v, _ := io.ReadAll(b.Reader())
		if resp, err := abi.DecodeHTTPResponse(v); err == nil {
			v = resp.Body // a fetch result is spliced as its body
		}
		if !utf8.Valid(v) {
			return kindapi.Errorf(abi.EINVAL, "%s: spliced blob %d is not UTF-8 text", what, i)
		}
		vals[i] = v
		c.spliced = append(c.spliced, b.Label())
	}
	parts := make([]any, len(r.SpliceParts))
	srcs := make([]kindapi.Source, len(r.SpliceParts))
	for i, sp := range r.SpliceParts {
		b, err := call.BlobPartOf(sp)
		if err != nil {
			return err
		}
		dec := json.NewDecoder(b.Reader())
		dec.UseNumber()
		if err := dec.Decode(&parts[i]); err != nil {
			return kindapi.Errorf(abi.EINTERNAL, "%s: part %d: %v", what, i, err)
		}
		srcs[i] = kindapi.Source{Label: b.Label(), Path: sp.Path, Pattern: sp.Pattern, Written: b.Written()}
		c.spliced = append(c.spliced, b.Label())
	}
	prov := map[string]kindapi.Source{}
	var walk func(v any, place string) (any, error)
	walk = func(v any, place string) (any, error) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if strings.Contains(k, abi.PartPrefix) || strings.Contains(k, kindapi.SplicePrefix) {
					return nil, kindapi.Errorf(abi.EINVAL, "%s: a placeholder in a member name", what)
				}
				// A place is written .name or [N]: a member named "a.b"
				// would share the place of member b of member a.
				if len(parts) > 0 && strings.ContainsAny(k, ".[]") {
					return nil, kindapi.Errorf(abi.EINVAL, "%s: at %s: arguments splicing parts may not have a member name with '.', '[' or ']' (%s)", what, place, kindapi.QuoteTrunc(k))
				}
				nv, err := walk(e, place+"."+k)
				if err != nil {
					return nil, err
				}
				x[k] = nv
			}
		case []any:
			for i, e := range x {
				nv, err := walk(e, place+"["+strconv.Itoa(i)+"]")
				if err != nil {
					return nil, err
				}
				x[i] = nv
			}
		case string:
			if strings.Contains(x, abi.PartPrefix) {
				for i := range parts {
					if x == abi.PartPlaceholder(i) {
						prov[place] = srcs[i]
						return parts[i], nil
					}
				}
				return nil, kindapi.Errorf(abi.EINVAL, "%s: at %s: a part placeholder must be a whole string value naming a spliced part (have %d)", what, place, len(parts))
			}
			return kindapi.Substitute(x, vals, func(v []byte) string { return string(v) }, what)
		}
		return v, nil
	}
	if _, err := walk(obj, "args"); err != nil {
		return err
	}
	if len(prov) > 0 {
		c.prov = prov
	}
	return nil
}

// checkPin refuses a tool whose definition (digest) is not the one the
// grant pinned.
func (s *Scope) checkPin(what, tool, digest string) error {
	pin := s.pins[tool]
	switch {
	case pin == "":
		return kindapi.Errorf(abi.EDENIED, "%s: tool %s is not pinned: its definition is %s; pin it (mandate check prints the digests) once you have read it",
			what, kindapi.QuoteTrunc(tool), digest)
	case pin != digest:
		return kindapi.Errorf(abi.EDENIED, "%s: tool %s changed since it was pinned (%s): its definition is %s; pin it (mandate check prints the digests) once you have read it",
			what, kindapi.QuoteTrunc(tool), pin, digest)
	}
	return nil
}

// cost is a call's amount: the costs entry naming the tool most
// specifically, else 1.
func (s *Scope) cost(tool string) int64 {
	best, n := "", int64(1)
	for p, c := range s.costs {
		if glob(p, tool) && (best == "" || moreSpecific(p, best)) {
			best, n = p, c
		}
	}
	return n
}

// vars is what constraints see: tool and args (with the splices in;
// where a value came from a part is the call's provenance).
func (c *toolCall) vars() (map[string]any, error) {
	args, err := kindapi.DecodeJSONValue(c.args)
	if err != nil {
		return nil, err
	}
	return map[string]any{"tool": c.tool, "args": args}, nil
}

func (c *toolCall) show() kindapi.Preview {
	d := []kindapi.Detail{
		{Name: "tool", Value: c.tool}, {Name: "upstream", Value: c.s.identity},
		{Name: "arguments", Value: c.written},
	}
	for i, l := range c.spliced {
		d = append(d, kindapi.Detail{Name: fmt.Sprintf("spliced %d", i), Value: l.String()})
	}
	return kindapi.Preview{Summary: "call " + c.tool + " on " + c.s.identity, Details: d}
}

func (c *toolCall) account() kindapi.Account {
	return kindapi.Account{Action: "call " + c.tool + " on " + c.s.identity, Written: " " + c.written}
}

// callResult is a call's result blob: the server's CallToolResult.
type callResult struct {
	Content           []json.RawMessage `json:"content"`
	StructuredContent any               `json:"structuredContent,omitempty"`
	IsError           bool              `json:"isError"`
}

// run connects (if need be), lists the tools, checks the pin against the
// current definition (nothing is sent for a tool that fails it), calls
// the tool and reads its result within the bounds.
func (c *toolCall) run(ctx context.Context) (*kindapi.Result, error) {
	const what = "mcp: call"
	s := c.s
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	u, err := c.k.upstreamFor(s)
	if err != nil {
		return nil, err
	}
	sess, err := u.session(ctx, what)
	if err != nil {
		return nil, err
	}
	defs, err := u.listTools(ctx, sess, s.maxTools, what)
	if err != nil {
		return nil, kindapi.NotPerformed(err)
	}
	d, ok := defs[c.tool]
	if !ok {
		return nil, kindapi.NotPerformed(kindapi.Errorf(abi.EIO, "%s: the server %s lists no tool %s; nothing was sent", what, s.identity, kindapi.QuoteTrunc(c.tool)))
	}
	if err := s.checkPin(what, c.tool, d.digest); err != nil {
		return nil, kindapi.NotPerformed(err)
	}
	res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: c.tool, Arguments: json.RawMessage(c.args)})
	if err != nil {
		return nil, u.failure(ctx, sess, err, what, "calling "+c.tool)
	}
	if res == nil {
		return nil, kindapi.Errorf(abi.EIO, "%s: the server %s answered nothing", what, s.identity)
	}
	u.ok()
	out := callResult{Content: []json.RawMessage{}, StructuredContent: res.StructuredContent, IsError: res.IsError}
	var size int64
	for _, ct := range res.Content {
		b, err := json.Marshal(ct)
		if err != nil {
			return nil, kindapi.Errorf(abi.EIO, "%s: the server's result: %v", what, err)
		}
		if size += int64(len(b)); size > s.maxResponse {
			return nil, kindapi.Errorf(abi.ELIMIT, "%s: the result exceeds max_response_bytes %d", what, s.maxResponse)
		}
		out.Content = append(out.Content, b)
	}
	res2, err := c.k.result(what, u, s, "call "+c.tool, c.tool, out)
	if err != nil {
		return nil, err
	}
	res2.Outcome = "done"
	if res.IsError {
		res2.Outcome = "the tool reported an error"
	}
	return res2, nil
}

// result writes v as a result blob of the scope, within its bounds,
// labelled for key.
func (k *Kind) result(what string, u *upstream, s *Scope, _ string, key string, v any) (*kindapi.Result, error) {
	data, err := canonical(v)
	if err != nil {
		return nil, kindapi.Errorf(abi.EIO, "%s: the server's result: %v", what, err)
	}
	if int64(len(data)) > s.maxResponse {
		return nil, kindapi.Errorf(abi.ELIMIT, "%s: the result is %d bytes (max_response_bytes %d)", what, len(data), s.maxResponse)
	}
	if u.echoes(data) {
		return nil, kindapi.Errorf(abi.EIO, "%s: the server's result contains a header the kernel injected; it is withheld", what)
	}
	label, parts := s.labels(key, data)
	return &kindapi.Result{Data: data, Label: label, Parts: parts}, nil
}

// markSpliced shows each splice placeholder in s as "[spliced N]" and
// each part placeholder as "[spliced part N]".
func markSpliced(s string) string {
	for i := 0; i < abi.MaxSplice && strings.Contains(s, kindapi.SplicePrefix); i++ {
		s = strings.ReplaceAll(s, abi.SplicePlaceholder(i), "[spliced "+strconv.Itoa(i)+"]")
	}
	for i := 0; i < abi.MaxSplice && strings.Contains(s, abi.PartPrefix); i++ {
		s = strings.ReplaceAll(s, abi.PartPlaceholder(i), "[spliced part "+strconv.Itoa(i)+"]")
	}
	return s
}

// listOp is a prepared tools, resources or prompts: nothing of the task
// is sent.
type listOp struct {
	k  *Kind
	s  *Scope
	op string
}

func (k *Kind) prepareList(call *kindapi.Call, s *Scope) (kindapi.Op, error) {
	what := "mcp: " + call.Op
	var empty struct{}
	if len(bytes.TrimSpace(call.Args)) > 0 {
		if err := abi.DecodeJSON(call.Args, &empty); err != nil {
			return kindapi.Op{}, decodeErr(what+": the arguments must be {}", err)
		}
	}
	switch {
	case call.Op == OpResources && len(s.resources) == 0:
		return kindapi.Op{}, kindapi.Errorf(abi.EDENIED, "%s: the capability passes no resources through", what)
	case call.Op == OpPrompts && len(s.prompts) == 0:
		return kindapi.Op{}, kindapi.Errorf(abi.EDENIED, "%s: the capability passes no prompts through", what)
	}
	l := &listOp{k: k, s: s, op: call.Op}
	return kindapi.Op{Vars: noVars(map[string]any{}), Effect: l.run}, nil
}

// noVars is what constraints see of an operation other than call: tool
// "" and args its arguments.
func noVars(args map[string]any) func() (map[string]any, error) {
	return func() (map[string]any, error) { return map[string]any{"tool": "", "args": args}, nil }
}

func (l *listOp) run(ctx context.Context) (*kindapi.Result, error) {
	what := "mcp: " + l.op
	s := l.s
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	u, err := l.k.upstreamFor(s)
	if err != nil {
		return nil, err
	}
	sess, err := u.session(ctx, what)
	if err != nil {
		return nil, err
	}
	out := []json.RawMessage{}
	switch l.op {
	case OpTools:
		defs, err := u.listTools(ctx, sess, s.maxTools, what)
		if err != nil {
			return nil, err
		}
		names := make([]string, 0, len(defs))
		for n := range defs {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			// Only the definitions as pinned: a description reaches
			// anyone only as the text the operator read.
			if d := defs[n]; s.AllowsTool(n) && s.pins[n] == d.digest {
				out = append(out, d.canon)
			}
		}
	case OpResources:
		var err error
		out, err = listPaged(s.maxTools, what, "resources", func(cursor string) ([]*sdk.Resource, string, error) {
			res, err := sess.ListResources(ctx, &sdk.ListResourcesParams{Cursor: cursor})
			if err != nil {
				return nil, "", u.failure(ctx, sess, err, what, "listing its resources")
			}
			return res.Resources, res.NextCursor, nil
		}, func(r *sdk.Resource) bool { return resourceAllowed(s.resources, r.URI) })
		if err != nil {
			return nil, err
		}
	case OpPrompts:
		var err error
		out, err = listPaged(s.maxTools, what, "prompts", func(cursor string) ([]*sdk.Prompt, string, error) {
			res, err := sess.ListPrompts(ctx, &sdk.ListPromptsParams{Cursor: cursor})
			if err != nil {
				return nil, "", u.failure(ctx, sess, err, what, "listing its prompts")
			}
			return res.Prompts, res.NextCursor, nil
		}, func(p *sdk.Prompt) bool { return matchAny(s.prompts, p.Name) })
		if err != nil {
			return nil, err
		}
	}
	u.ok()
	return l.k.result(what, u, s, l.op, "", out)
}

// listPaged reads a server's paginated list (page returns one page and
// the next cursor), keeping the items keep allows, as JSON: at most max
// of them (ELIMIT past it), and at most max pages (a list that does not
// end is EIO).
func listPaged[T any](max int, what, items string, page func(cursor string) ([]*T, string, error), keep func(*T) bool) ([]json.RawMessage, error) {
	out := []json.RawMessage{}
	cursor := ""
	for pages := 0; ; pages++ {
		list, next, err := page(cursor)
		if err != nil {
			return nil, err
		}
		for _, x := range list {
			if x == nil || !keep(x) {
				continue
			}
			if len(out) >= max {
				return nil, kindapi.Errorf(abi.ELIMIT, "%s: the server lists more than max_tools %d %s", what, max, items)
			}
			b, err := json.Marshal(x)
			if err != nil {
				return nil, kindapi.Errorf(abi.EIO, "%s: %v", what, err)
			}
			out = append(out, b)
		}
		if next == "" {
			return out, nil
		}
		if pages >= max {
			return nil, kindapi.Errorf(abi.EIO, "%s: the server's list does not end", what)
		}
		cursor = next
	}
}

// fetchOp is a prepared read or prompt: what the task wrote (a URI, a
// prompt's arguments) is sent.
type fetchOp struct {
	k    *Kind
	s    *Scope
	op   string
	uri  string
	name string
	args map[string]string
}

func (k *Kind) prepareRead(call *kindapi.Call, s *Scope) (kindapi.Op, error) {
	const what = "mcp: read"
	r, err := abi.DecodeMCPReadRequest(call.Args)
	if err != nil {
		return kindapi.Op{}, decodeErr(what, err)
	}
	if !resourceAllowed(s.resources, r.URI) {
		return kindapi.Op{}, kindapi.Errorf(abi.EDENIED, "%s: resource %s is not granted", what, kindapi.QuoteTrunc(r.URI))
	}
	f := &fetchOp{k: k, s: s, op: OpRead, uri: r.URI}
	return kindapi.Op{Sink: s.refusal.Sink(s.clearance), Vars: noVars(map[string]any{"uri": r.URI}), Effect: f.run}, nil
}

func (k *Kind) preparePrompt(call *kindapi.Call, s *Scope) (kindapi.Op, error) {
	const what = "mcp: prompt"
	if int64(len(call.Args)) > s.maxRequest {
		return kindapi.Op{}, kindapi.Errorf(abi.ELIMIT, "%s: the request is %d bytes (max_request_bytes %d)", what, len(call.Args), s.maxRequest)
	}
	r, err := abi.DecodeMCPPromptRequest(call.Args)
	if err != nil {
		return kindapi.Op{}, decodeErr(what, err)
	}
	if !matchAny(s.prompts, r.Name) {
		return kindapi.Op{}, kindapi.Errorf(abi.EDENIED, "%s: prompt %s is not granted", what, kindapi.QuoteTrunc(r.Name))
	}
	args := map[string]any{}
	for k, v := range r.Arguments {
		args[k] = v
	}
	f := &fetchOp{k: k, s: s, op: OpPrompt, name: r.Name, args: r.Arguments}
	return kindapi.Op{Sink: s.refusal.Sink(s.clearance), Vars: noVars(map[string]any{"name": r.Name, "arguments": args}), Effect: f.run}, nil
}

func (f *fetchOp) run(ctx context.Context) (*kindapi.Result, error) {
	what := "mcp: " + f.op
	s := f.s
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	u, err := f.k.upstreamFor(s)
	if err != nil {
		return nil, err
	}
	sess, err := u.session(ctx, what)
	if err != nil {
		return nil, err
	}
	var v any
	var key string
	if f.op == OpRead {
		res, err := sess.ReadResource(ctx, &sdk.ReadResourceParams{URI: f.uri})
		if err != nil {
			return nil, u.failure(ctx, sess, err, what, "reading "+f.uri)
		}
		if res == nil {
			return nil, kindapi.Errorf(abi.EIO, "%s: the server %s answered nothing", what, s.identity)
		}
		contents := res.Contents
		if contents == nil {
			contents = []*sdk.ResourceContents{}
		}
		v, key = map[string]any{"contents": contents}, "resource:"+f.uri
	} else {
		res, err := sess.GetPrompt(ctx, &sdk.GetPromptParams{Name: f.name, Arguments: f.args})
		if err != nil {
			return nil, u.failure(ctx, sess, err, what, "getting "+f.name)
		}
		if res == nil {
			return nil, kindapi.Errorf(abi.EIO, "%s: the server %s answered nothing", what, s.identity)
		}
		msgs := res.Messages
		if msgs == nil {
			msgs = []*sdk.PromptMessage{}
		}
		v, key = map[string]any{"description": res.Description, "messages": msgs}, "prompt:"+f.name
	}
	u.ok()
	return f.k.result(what, u, s, f.op, key, v)
}
