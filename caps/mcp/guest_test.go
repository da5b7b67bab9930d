package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mandatevm/mandate/caps/mcp"
	"github.com/mandatevm/mandate/caps/net"
	"github.com/mandatevm/mandate/constraint"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox"
)

// This file attacks the mcp kind end to end, through a real guest:
// testdata/guests/mcp-attacker runs under the kernel (on the engine of
// this build, internal/testengine) holding mcp capabilities on one
// loopback upstream MCP server (an in-process Go SDK server over
// Streamable HTTP, recording every message it receives), and tries to
// call tools it was not granted, break its when constraints, widen its
// capabilities, forge handles, splice data above the server's clearance
// and read the Authorization header the kernel injects. The test checks
// the guest's errno for each attack AND what reached the upstream: how
// many calls of each tool, with exactly which arguments. The injected
// token must appear nowhere the guest or the host's records can see it
// (result, output, last error, logs, graph, audit).
// TestGuestMCPEchoEscaped and TestGuestMCPFieldMirror hold attacks that
// succeeded against caps/mcp before it was fixed; they stay as tests.

const (
	gaToken  = "mcp-attacker-tok-Zq7vX3kP9w"
	gaEnvVar = "MCP_ATTACKER_TOKEN"
	gaSSN    = "123-45-6789"
)

// gaOrder is the order the guest performs its attacks in
// (flow_tainted_self, which labels the guest pii:alice, runs on its own).
var gaOrder = []string{
	"baseline",
	// 2. names
	"name_other", "name_upper", "name_trailing_space", "name_leading_space", "name_cyrillic",
	"name_zero_width", "name_nul", "name_star", "name_pattern", "name_empty", "name_long", "name_literal_pattern",
	// 3. when and sizes
	"when_outside", "when_dotdot", "when_dotdot_naive", "when_missing", "when_no_args", "when_list", "when_number",
	"when_case", "when_fullwidth", "when_dup_key", "when_dup_key_rev", "when_not_object", "when_splice",
	"when_splice_dotdot", "when_splice_ok", "when_oversize", "when_oversize_splice", "when_splice_many",
	// 4. narrowing
	"derive_more_tools", "derive_star", "derive_pattern", "derive_drop_pins", "derive_swap_pin", "derive_clearance",
	"derive_timeout", "derive_timeout_max", "derive_request", "derive_results", "derive_vault_widen", "derive_other_server",
	"narrow", "narrow_when", "revoke",
	// 5. handles
	"handle_forged", "handle_zero", "handle_gen", "handle_stale", "handle_blob", "handle_wrong_kind", "handle_wrong_op",
	"splice_cap", "splice_forged", "splice_member_name", "splice_unused_index",
	// 6. flows
	"vault_read", "flow_splice_high", "flow_part_high", "flow_splice_high_multi", "flow_share", "flow_share_part", "narrow_clearance", "narrow_untrusted", "flow_after",
	// 7. the injected header
	"hdr_reflect", "hdr_reflect_struct", "hdr_reflect_error", "hdr_reflect_rpc", "hdr_after", "hdr_describe",
	// 8. pins
	"tools_multi", "tools_files", "tools_unpinned", "tools_rug",
}

// gaWant is each result key's errno.
var gaWant = map[string]string{
	"baseline": "ESUCCESS",

	"name_other":          "EDENIED",
	"name_upper":          "EDENIED",
	"name_trailing_space": "EDENIED",
	"name_leading_space":  "EDENIED",
	"name_cyrillic":       "EDENIED",
	"name_zero_width":     "EDENIED",
	"name_nul":            "EDENIED",
	"name_star":           "EDENIED",
	"name_pattern":        "EDENIED",
	"name_empty":          "EINVAL",
	"name_long":           "ELIMIT",
	// list_* read literally is allowed by the pattern list_*; the server
	// lists no such tool, so nothing is sent.
	"name_literal_pattern": "EIO",

	"when_outside":         "EDENIED",
	"when_dotdot":          "EDENIED",
	"when_dotdot_naive":    "ESUCCESS", // startsWith alone admits it: see TestGuestMCPWhenIsText
	"when_missing":         "EDENIED",
	"when_no_args":         "EDENIED",
	"when_list":            "EDENIED",
	"when_number":          "EDENIED",
	"when_case":            "EDENIED",
	"when_fullwidth":       "EDENIED",
	"when_dup_key":         "EINVAL", // a duplicate member is malformed: the check and the server cannot read it apart
	"when_dup_key_rev":     "EINVAL",
	"when_not_object":      "EINVAL",
	"when_splice":          "EDENIED", // constraints see the splices in
	"when_splice_dotdot":   "EDENIED",
	"when_splice_ok":       "ESUCCESS",
	"when_oversize":        "ELIMIT",
	"when_oversize_splice": "ELIMIT",
	"when_splice_many":     "ELIMIT",

	"derive_more_tools":    "EDENIED",
	"derive_star":          "EDENIED",
	"derive_pattern":       "EDENIED",
	"derive_drop_pins":     "EDENIED",
	"derive_swap_pin":      "EDENIED",
	"derive_clearance":     "EDENIED",
	"derive_timeout":       "EDENIED",
	"derive_timeout_max":   "EINVAL",
	"derive_request":       "EDENIED",
	"derive_results":       "EDENIED",
	"derive_vault_widen":   "EDENIED",
	"derive_other_server":  "EINVAL",
	"narrow.derive":        "ESUCCESS",
	"narrow.list_dir":      "ESUCCESS",
	"narrow.read_file":     "EDENIED",
	"narrow.rewiden":       "EDENIED",
	"narrow_when.derive":   "ESUCCESS",
	"narrow_when.outside":  "EDENIED", // the parent's when still holds
	"narrow_when.inside":   "ESUCCESS",
	"narrow_when.oversize": "ELIMIT",

	"revoke.child":           "ESUCCESS",
	"revoke.before":          "ESUCCESS",
	"revoke.revoke":          "ESUCCESS",
	"revoke.child_call":      "EREVOKED",
	"revoke.child_derive":    "EREVOKED",
	"revoke.parent":          "ESUCCESS",
	"revoke.grandchild":      "ESUCCESS",
	"revoke.parent_revoke":   "ESUCCESS",
	"revoke.grandchild_call": "EREVOKED",
	"revoke.root_call":       "ESUCCESS",

	"handle_forged":       "EBADHANDLE",
	"handle_zero":         "EBADHANDLE",
	"handle_gen":          "EBADHANDLE",
	"handle_stale":        "EBADHANDLE",
	"handle_blob":         "EWRONGTYPE",
	"handle_wrong_kind":   "ENOTSUP",
	"handle_wrong_op":     "ENOTSUP",
	"splice_cap":          "EWRONGTYPE",
	"splice_forged":       "EBADHANDLE",
	"splice_member_name":  "EINVAL",
	"splice_unused_index": "EINVAL",

	"vault_read":             "ESUCCESS",
	"flow_splice_high":       "EFLOW",
	"flow_part_high":         "EFLOW",
	"flow_splice_high_multi": "EFLOW",
	"flow_share":             "ESUCCESS",
	"flow_share_part":        "ESUCCESS",
	"flow_after":             "ESUCCESS",

	"narrow_clearance.derive":  "ESUCCESS",
	"narrow_clearance.send":    "EFLOW",
	"narrow_clearance.rewiden": "EDENIED",
	"narrow_untrusted.derive":  "ESUCCESS",
	"narrow_untrusted.call":    "EFLOW",
	"narrow_untrusted.rewiden": "EDENIED",

	"hdr_reflect":        "EIO",
	"hdr_reflect_struct": "EIO",
	"hdr_reflect_error":  "EIO",
	"hdr_reflect_rpc":    "EIO",
	"hdr_after":          "ESUCCESS",
	"hdr_describe":       "ESUCCESS",

	"tools_multi": "ESUCCESS",
	// files' when reads args.path: the tools op has none, and a
	// constraint that cannot be evaluated refuses (fail closed).
	"tools_files":    "EDENIED",
	"tools_unpinned": "EDENIED",
	"tools_rug":      "EDENIED",
}

// gaCall is one tools/call the upstream received.
type gaCall struct {
	Tool string
	Args string // canonical JSON
	Auth []string
}

// gaUpstream is the upstream MCP server. Its tools: read_file and
// list_dir {"path"} (a file's "contents of PATH", a directory's
// "listing PATH"); list_secret (matched by list_* but never pinned);
// list_rug (pinned to another definition); delete_file, READ_FILE and
// read_fіle (Cyrillic і: never granted); whoami, whoami_struct,
// whoami_error and whoami_rpc (each reflects the Authorization header it
// received: as text, as structured content, as the tool's error, as a
// JSON-RPC error); read_secret (a record with an SSN); send {"to",
// "body"}.
type gaUpstream struct {
	srv *sdk.Server
	url string

	mu    sync.Mutex
	calls []gaCall
	auth  [][]string // every HTTP request's Authorization values
}

func newGAUpstream(t *testing.T) *gaUpstream {
	t.Helper()
	u := &gaUpstream{srv: sdk.NewServer(&sdk.Implementation{Name: "mcp-attacker-upstream", Version: "1"}, nil)}
	pathSchema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)
	object := json.RawMessage(`{"type":"object"}`)
	text := func(s string) []sdk.Content { return []sdk.Content{&sdk.TextContent{Text: s}} }
	pathOf := func(req *sdk.CallToolRequest) string {
		var a struct {
			Path any `json:"path"`
		}
		_ = json.Unmarshal(req.Params.Arguments, &a)
		return fmt.Sprint(a.Path)
	}
	auth := func(req *sdk.CallToolRequest) string {
		if req.Extra != nil && req.Extra.Header != nil {
			return req.Extra.Header.Get("Authorization")
		}
		return ""
	}
	add := func(name, desc string, schema json.RawMessage, h sdk.ToolHandler) {
		u.srv.AddTool(&sdk.Tool{Name: name, Description: desc, InputSchema: schema}, h)
	}
	for _, name := range []string{"read_file", "READ_FILE", "read_f\u0456le", "delete_file"} {
		add(name, "Reads or deletes a file.", pathSchema, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: text("contents of " + pathOf(req))}, nil
		})
	}
	for _, name := range []string{"list_dir", "list_secret", "list_rug"} {
		add(name, "Lists a directory.", pathSchema, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: text("listing " + pathOf(req))}, nil
		})
	}
	add("whoami", "Reflects the credential as text.", object, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: text("you are " + auth(req))}, nil
	})
	add("whoami_struct", "Reflects the credential as structured content.", object, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: text("ok"), StructuredContent: map[string]any{"auth": auth(req)}}, nil
	})
	add("whoami_error", "Reflects the credential in the tool's error.", object, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: text("rejected credential " + auth(req)), IsError: true}, nil
	})
	add("whoami_rpc", "Reflects the credential in a JSON-RPC error.", object, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: -32001, Message: "rejected credential " + auth(req)}
	})
	add("read_secret", "Reads a record.", object, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		// The structured content, and its JSON as text (as the MCP
		// specification asks, and the Go SDK does for typed tools).
		return &sdk.CallToolResult{Content: text(`{"name":"alice","ssn":"` + gaSSN + `"}`), StructuredContent: map[string]any{"name": "alice", "ssn": gaSSN}}, nil
	})
	add("send", "Sends a message.", json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"},"body":{"type":"string"}}}`),
		func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: text(fmt.Sprintf("sent %d bytes", len(req.Params.Arguments)))}, nil
		})

	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return u.srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string `json:"method"`
			Params struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &m)
		a := r.Header.Values("Authorization")
		u.mu.Lock()
		u.auth = append(u.auth, a)
		if m.Method == "tools/call" {
			u.calls = append(u.calls, gaCall{Tool: m.Params.Name, Args: gaCanon(t, m.Params.Arguments), Auth: a})
		}
		u.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	u.url = hs.URL + "/mcp"
	return u
}

// gaCanon is JSON with members sorted and no white space ("" for none).
func gaCanon(t testing.TB, raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return ""
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Errorf("the upstream received arguments that are not JSON: %q", raw)
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func (u *gaUpstream) Calls() []gaCall {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.calls)
}

func (u *gaUpstream) Auth() [][]string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.auth)
}

type gaResult struct {
	Errno  string `json:"errno"`
	Body   string `json:"body"`
	Detail string `json:"detail"`
}

// gaEnv is a kernel with the mcp and net kinds, the upstream, a net
// origin that must never be reached, and the attacker's grants.
type gaEnv struct {
	k      *kernel.Kernel
	mod    sandbox.Module
	grants []kernel.GrantSpec
	up     *gaUpstream
	web    *kerneltest.Recorder
	logs   *kerneltest.Buffer
	audit  *gaAudit
	token  string
	pins   map[string]string
}

// gaAudit keeps every audit event.
type gaAudit struct {
	mu     sync.Mutex
	events []kernel.AuditEvent
}

func (a *gaAudit) Record(_ context.Context, ev kernel.AuditEvent) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, ev)
	return nil
}

// text is every event as text (JSON and Go syntax), for searching it.
func (a *gaAudit) text() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var b strings.Builder
	for _, ev := range a.events {
		j, _ := json.Marshal(ev)
		fmt.Fprintf(&b, "%s\n%+v\n", j, ev)
		if ev.Effect != nil {
			fmt.Fprintf(&b, "%+v\n", *ev.Effect)
		}
	}
	return b.String()
}

var (
	gaBuildOnce sync.Once
	gaWasm      []byte
	gaBuildErr  error
)

func gaBuild(t *testing.T) []byte {
	t.Helper()
	gaBuildOnce.Do(func() {
		gaWasm, _, gaBuildErr = guestbuild.Build(context.Background(), filepath.Join("..", "..", "testdata", "guests", "mcp-attacker"), guestbuild.Options{})
	})
	if gaBuildErr != nil {
		t.Fatalf("building mcp-attacker: %v", gaBuildErr)
	}
	return gaWasm
}

// gaWrongPin is list_rug's pin: the digest of a definition the server
// does not list (the operator read another one).
var gaWrongPin = "sha256:" + strings.Repeat("1", 64)

func newGAEnv(t *testing.T, token string) *gaEnv {
	t.Helper()
	ctx := context.Background()
	up := newGAUpstream(t)

	web := kerneltest.NewRecorder(func(w http.ResponseWriter, _ *http.Request, _ kerneltest.Request) { fmt.Fprint(w, "net") })
	t.Cleanup(web.Close)

	logs := &kerneltest.Buffer{}
	logger := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace})
	kind := mcp.New(mcp.WithLogger(logger))
	t.Cleanup(func() { kind.Close() })
	netKind := net.New()
	t.Cleanup(netKind.CloseIdleConnections)
	eng := testengine.New(t)
	audit := &gaAudit{}
	k, err := kernel.New(kernel.Config{Engine: eng, Kinds: []kindapi.Kind{kind, netKind}, Logger: logger, Auditor: audit, Constraints: constraint.New()})
	if err != nil {
		t.Fatal(err)
	}
	gc := kindapi.GrantContext{LookupEnv: func(name string) (string, bool) {
		if name == gaEnvVar {
			return token, true
		}
		return "", false
	}}
	base := map[string]any{
		"url": up.url, "allow_private": true,
		"headers": []map[string]string{{"name": "Authorization", "env": gaEnvVar, "prefix": "Bearer "}},
	}

	// The operator reads the definitions and pins them (every tool of
	// the server; list_secret is left unpinned, list_rug pinned to
	// another definition).
	pins := map[string]string{}
	{
		dk := mcp.New()
		s, err := dk.Grant(gc, gaJSON(gaWith(base, map[string]any{"tools": []string{"*"}})))
		if err != nil {
			t.Fatal(err)
		}
		dctx, cancel := context.WithTimeout(ctx, time.Minute)
		defs, err := dk.Definitions(dctx, s)
		cancel()
		dk.Close()
		if err != nil {
			t.Fatalf("definitions: %v", err)
		}
		for _, d := range defs {
			pins[d.Name] = d.Digest
		}
	}
	pinsOf := func(tools ...string) map[string]string {
		m := map[string]string{}
		for _, n := range tools {
			if pins[n] == "" {
				t.Fatalf("the upstream lists no tool %s", n)
			}
			m[n] = pins[n]
		}
		return m
	}
	grant := func(name string, fields map[string]any, when ...string) kernel.GrantSpec {
		t.Helper()
		spec := gaJSON(gaWith(base, fields))
		scope, err := k.Grant(mcp.KindName, gc, spec)
		if err != nil {
			t.Fatalf("grant %s %s: %v", name, spec, err)
		}
		g := kernel.GrantSpec{Name: name, Kind: mcp.KindName, Scope: scope, Audit: true}
		if len(when) > 0 {
			if g.Constraints, err = k.CompileConstraints(mcp.KindName, when, nil); err != nil {
				t.Fatalf("grant %s: when: %v", name, err)
			}
		}
		return g
	}
	multiPins := pinsOf("read_file", "list_dir", "whoami", "whoami_struct", "whoami_error", "whoami_rpc")
	multiPins["list_rug"] = gaWrongPin
	grants := []kernel.GrantSpec{
		grant("files", map[string]any{"tools": []string{"read_file"}, "pins": pinsOf("read_file"),
			"max_request_bytes": 1024, "timeout": "30s"},
			"args.path.startsWith('/public/')", "!args.path.contains('..')"),
		grant("naive", map[string]any{"tools": []string{"read_file"}, "pins": pinsOf("read_file")},
			"args.path.startsWith('/public/')"),
		grant("multi", map[string]any{"tools": []string{"read_file", "list_*", "whoami", "whoami_*"}, "pins": multiPins, "timeout": "30s"}),
		grant("vault", map[string]any{"tools": []string{"read_secret"}, "pins": pinsOf("read_secret"),
			"results": map[string]any{"read_secret": map[string]any{"labels": []string{"pii:alice"}}}, "clearance": []string{"pii:alice"}}),
		grant("ledger", map[string]any{"tools": []string{"read_secret"}, "pins": pinsOf("read_secret"), "clearance": []string{"pii:alice"},
			"results": map[string]any{"read_secret": map[string]any{"fields": map[string]any{
				"$.structuredContent.ssn": map[string]any{"taint": "ledger:ssn", "labels": []string{"pii:alice"}}}}}}),
		grant("share", map[string]any{"tools": []string{"send"}, "pins": pinsOf("send"), "clearance": []string{"pii:alice"}}),
	}
	webScope, err := k.Grant("net", gc, []byte(`{"origin":"http://127.0.0.1:`+web.Port()+`","methods":["GET","POST"],"paths":["/"],"allow_private":true}`))
	if err != nil {
		t.Fatal(err)
	}
	grants = append(grants, kernel.GrantSpec{Name: "web", Kind: "net", Scope: webScope})

	mod, err := eng.Compile(ctx, gaBuild(t))
	if err != nil {
		t.Fatal(err)
	}
	return &gaEnv{k: k, mod: mod, grants: grants, up: up, web: web, logs: logs, audit: audit, token: token, pins: pins}
}

func gaWith(base, fields map[string]any) map[string]any {
	m := map[string]any{}
	for k, v := range base {
		m[k] = v
	}
	for k, v := range fields {
		m[k] = v
	}
	return m
}

func gaJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// run runs the attacker with attacks and returns its task, raw result
// and decoded result.
func (e *gaEnv) run(t *testing.T, attacks []string) (*kernel.Task, []byte, map[string]gaResult) {
	t.Helper()
	input, _ := json.Marshal(map[string]any{"attacks": attacks})
	task, err := e.k.Run(context.Background(), kernel.TaskSpec{
		Module: e.mod, Principal: "mallory", Grants: e.grants, Input: input,
		Limits: kernel.Limits{Timeout: 5 * time.Minute},
	})
	if err != nil {
		t.Fatalf("run: %v\nstderr: %s", err, task.Stderr().String())
	}
	raw, ok := task.Result()
	if !ok {
		t.Fatalf("no result; stderr: %s", task.Stderr().String())
	}
	var got map[string]gaResult
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("result %q: %v", raw, err)
	}
	return task, raw, got
}

// leaks lists where the token appears among what the guest and the host
// saw: the guest's result (raw and each value decoded), its output, its
// last error, the logs and the graph.
func (e *gaEnv) leaks(task *kernel.Task, raw []byte, got map[string]gaResult) []string {
	var where []string
	g, _ := json.Marshal(e.k.Graph())
	seen := map[string]string{
		"result": string(raw), "stdout": task.Stdout().String(), "stderr": task.Stderr().String(),
		"last_error": task.LastError(), "logs": e.logs.String(), "graph": string(g), "audit": e.audit.text(),
	}
	for key, r := range got {
		seen["result "+key+" body"] = r.Body
		seen["result "+key+" detail"] = r.Detail
	}
	for what, s := range seen {
		if strings.Contains(strings.ToLower(s), strings.ToLower(e.token)) {
			where = append(where, what)
		}
	}
	slices.Sort(where)
	return where
}

func (e *gaEnv) redact(s string) string { return strings.ReplaceAll(s, e.token, "[TOKEN]") }

func TestGuestMCPAttacks(t *testing.T) {
	start := time.Now()
	e := newGAEnv(t, gaToken)
	task, raw, got := e.run(t, gaOrder)

	for key, want := range gaWant {
		g, ok := got[key]
		if !ok {
			t.Errorf("%s: no result", key)
			continue
		}
		if g.Errno != want {
			t.Errorf("%s: got %s (%s), want %s", key, g.Errno, e.redact(g.Detail), want)
		}
	}
	for key, g := range got {
		if _, ok := gaWant[key]; !ok {
			t.Errorf("%s: unexpected result %+v", key, g)
		}
	}
	if t.Failed() {
		t.Logf("guest stdout:\n%s", e.redact(task.Stdout().String()))
	}

	// What the guest read.
	for key, body := range map[string]string{
		"baseline":           "contents of /public/a.txt",
		"when_dotdot_naive":  "contents of /public/../secret/naive",
		"when_splice_ok":     "contents of /public/b.txt",
		"narrow.list_dir":    "listing /public/narrow",
		"narrow_when.inside": "contents of /public/narrowed",
		"flow_after":         "contents of /public/after.txt",
		"hdr_after":          "contents of /public/hdr-after",
	} {
		if got[key].Body != body {
			t.Errorf("%s: read %q, want %q", key, got[key].Body, body)
		}
	}
	for _, key := range []string{"name_other", "tools_unpinned", "tools_rug", "name_literal_pattern"} {
		if d := got[key].Detail; !strings.Contains(d, "nothing") && !strings.Contains(d, "not granted") && !strings.Contains(d, "pinned") {
			t.Errorf("%s: reason %q does not say why", key, d)
		}
	}
	if d := got["tools_unpinned"].Detail; !strings.Contains(d, "not pinned") || !strings.Contains(d, e.pins["list_secret"]) {
		t.Errorf("tools_unpinned: reason %q; want it to name the definition's digest", d)
	}
	if d := got["tools_rug"].Detail; !strings.Contains(d, "changed since it was pinned") {
		t.Errorf("tools_rug: reason %q", d)
	}

	// tools shows only the pinned definitions, each exactly as pinned.
	if d := got["tools_multi"].Detail; d != "list_dir,read_file,whoami,whoami_error,whoami_rpc,whoami_struct" {
		t.Errorf("tools_multi: the guest was shown %q; want the pinned tools only (never list_secret, list_rug)", d)
	}
	if d := got["tools_files"].Detail; !strings.Contains(d, "cannot be evaluated") {
		t.Errorf("tools_files: %q; want the when that cannot be evaluated without args.path", d)
	}
	var defs []json.RawMessage
	if err := json.Unmarshal([]byte(got["tools_multi"].Body), &defs); err != nil {
		t.Errorf("tools_multi: %v", err)
	}
	for _, d := range defs {
		var n struct{ Name string }
		_ = json.Unmarshal(d, &n)
		if dg, err := mcp.Digest(d); err != nil || dg != e.pins[n.Name] {
			t.Errorf("tools_multi: %s shown with digest %s (%v), pinned %s", n.Name, dg, err, e.pins[n.Name])
		}
	}

	// A result reflecting the header is withheld; an error quoting it is
	// redacted.
	for _, key := range []string{"hdr_reflect", "hdr_reflect_struct", "hdr_reflect_error"} {
		if d := got[key].Detail; !strings.Contains(d, "withheld") {
			t.Errorf("%s: reason %q; want the result withheld", key, e.redact(d))
		}
	}
	if d := got["hdr_reflect_rpc"].Detail; !strings.Contains(d, "rejected credential") || !strings.Contains(d, "[redacted]") {
		t.Errorf("hdr_reflect_rpc: reason %q; want the server's message with the value redacted", e.redact(d))
	}

	// cap_describe names the header and where it is read, never the value.
	if d := got["hdr_describe"].Detail; !strings.Contains(d, "Authorization") || !strings.Contains(d, gaEnvVar) {
		t.Errorf("hdr_describe: %s; want the injected header's name and source", e.redact(d))
	}

	// What reached the upstream: exactly these calls, with exactly these
	// arguments; a refused call never reached it.
	calls := e.up.Calls()
	perTool := map[string][]string{}
	for _, c := range calls {
		perTool[c.Tool] = append(perTool[c.Tool], c.Args)
		if len(c.Auth) != 1 || c.Auth[0] != "Bearer "+e.token {
			t.Errorf("tools/call %s %s: Authorization is not exactly the injected value (%d values)", c.Tool, c.Args, len(c.Auth))
		}
	}
	wantCalls := map[string][]string{
		"read_file": {
			`{"path":"/public/a.txt"}`,           // baseline
			`{"path":"/public/../secret/naive"}`, // when_dotdot_naive
			`{"path":"/public/b.txt"}`,           // when_splice_ok
			`{"path":"/public/narrowed"}`,        // narrow_when.inside
			`{"path":"/public/rev-before"}`,      // revoke.before
			`{"path":"/public/rev-root"}`,        // revoke.root_call
			`{"path":"/public/after.txt"}`,       // flow_after
			`{"path":"/public/hdr-after"}`,       // hdr_after
		},
		"list_dir":      {`{"path":"/public/narrow"}`},
		"read_secret":   {`{}`},
		"whoami":        {`{}`},
		"whoami_struct": {`{}`},
		"whoami_error":  {`{}`},
		"whoami_rpc":    {`{}`},
	}
	for tool, want := range wantCalls {
		if !slices.Equal(perTool[tool], want) {
			t.Errorf("the upstream received %s %d times with %q; want %q", tool, len(perTool[tool]), perTool[tool], want)
		}
	}
	// send: the vault's result spliced whole (its text), and its SSN part.
	if s := perTool["send"]; len(s) != 2 || !strings.Contains(s[0], gaSSN) || !strings.Contains(s[0], `"to":"hr"`) ||
		s[1] != `{"body":"`+gaSSN+`","to":"hr"}` {
		t.Errorf("the upstream received send %d times: %q; want the secret spliced whole, then its part", len(s), s)
	}
	for tool := range perTool {
		if _, ok := wantCalls[tool]; !ok && tool != "send" {
			t.Errorf("the upstream received a call of %s (%q), which every attack was refused", tool, perTool[tool])
		}
	}
	for _, c := range calls {
		if c.Tool != "send" && strings.Contains(c.Args, gaSSN) {
			t.Errorf("the SSN reached the upstream through %s: %s", c.Tool, c.Args)
		}
		if strings.Contains(c.Args, "/secret") && c.Args != `{"path":"/public/../secret/naive"}` {
			t.Errorf("the upstream received %s %s", c.Tool, c.Args)
		}
	}
	// Every HTTP request (the handshake, lists, calls, the session's
	// stream) carried the injected header, exactly once.
	for i, a := range e.up.Auth() {
		if len(a) != 1 || a[0] != "Bearer "+e.token {
			t.Errorf("HTTP request %d to the upstream: Authorization is not exactly the injected value (%d values)", i, len(a))
		}
	}
	if n := len(e.web.Requests()); n != 0 {
		t.Errorf("the net origin received %d requests; the wrong kind's handle must send nothing", n)
	}

	// The guest passed the secret on without reading it: its label has no
	// confidentiality tag.
	if c := task.Label().Conf(); len(c) != 0 {
		t.Errorf("the guest's label is %v; splicing a blob it never read must not raise it", task.Label())
	}
	// The token never reached the guest, the logs or the graph.
	if where := e.leaks(task, raw, got); len(where) > 0 {
		t.Errorf("the injected token appears in: %v", where)
	}
	if task.Stdout().Truncated {
		t.Error("the guest's stdout was truncated: the token check did not see everything")
	}
	if at := e.audit.text(); !strings.Contains(at, "read_file") || !strings.Contains(at, "/public/a.txt") {
		t.Errorf("the audit log does not record the calls (%d bytes)", len(at))
	}
	if d := task.Denials(); d < 40 {
		t.Errorf("task recorded %d denials, want every refusal counted", d)
	}
	t.Logf("%d results, %d calls reached the upstream; test %v", len(got), len(calls), time.Since(start))
}

// TestGuestMCPTaintedSelf: once the guest reads the secret, it is
// labelled pii:alice; a public upstream refuses its calls (EFLOW, nothing
// sent) and the one cleared for pii:alice still takes them.
func TestGuestMCPTaintedSelf(t *testing.T) {
	e := newGAEnv(t, gaToken)
	task, _, got := e.run(t, []string{"vault_read", "flow_tainted_self"})
	for key, want := range map[string]string{
		"vault_read": "ESUCCESS", "flow_tainted_self.read": "ESUCCESS",
		"flow_tainted_self.public": "EFLOW", "flow_tainted_self.share": "ESUCCESS",
	} {
		if got[key].Errno != want {
			t.Errorf("%s: got %s (%s), want %s", key, got[key].Errno, got[key].Detail, want)
		}
	}
	if !slices.Contains(task.Label().Conf(), "pii:alice") {
		t.Errorf("the guest read the secret and is labelled %v", task.Label())
	}
	var tools []string
	for _, c := range e.up.Calls() {
		tools = append(tools, c.Tool+" "+c.Args)
	}
	if want := []string{"read_secret {}", `send {"body":"tainted","to":"hr"}`}; !slices.Equal(tools, want) {
		t.Errorf("the upstream received %q, want %q", tools, want)
	}
}

// TestGuestMCPEchoEscaped: a server that reflects the injected header
// must never let the guest read it, whatever characters the credential
// holds. A header value may hold '&', '<', '>', '"' and '\', which JSON
// writes escaped: the result the guest reads must be checked for the
// value as the guest will decode it, not only for its bytes verbatim.
// Both cases leaked before the kind checked the decoded forms.
func TestGuestMCPEchoEscaped(t *testing.T) {
	for _, tc := range []struct {
		name, token string
	}{
		{"html", "tok&en<Zq7vX3kP9w>"},
		{"quote", `tok"en\Zq7vX3kP9w`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newGAEnv(t, tc.token)
			task, raw, got := e.run(t, []string{"hdr_reflect", "hdr_reflect_struct", "hdr_reflect_error", "hdr_reflect_rpc", "hdr_describe", "baseline"})
			if got["baseline"].Errno != "ESUCCESS" {
				t.Errorf("baseline: %s (%s)", got["baseline"].Errno, e.redact(got["baseline"].Detail))
			}
			for _, c := range e.up.Calls() {
				if len(c.Auth) != 1 || c.Auth[0] != "Bearer "+tc.token {
					t.Errorf("tools/call %s: Authorization is not exactly the injected value", c.Tool)
				}
			}
			if where := e.leaks(task, raw, got); len(where) > 0 {
				var errnos []string
				for _, k := range []string{"hdr_reflect", "hdr_reflect_struct", "hdr_reflect_error", "hdr_reflect_rpc"} {
					errnos = append(errnos, k+"="+got[k].Errno)
				}
				t.Errorf("the injected token %q reached the guest: it appears in %v (%v)", tc.token, where, errnos)
			}
		})
	}
}

// TestGuestMCPFieldMirror: ledger labels only a result's
// structuredContent.ssn (fields, with labels = ["pii:alice"]). An MCP
// server returning structured content also returns it serialised in a
// text item (the MCP specification asks it to; the Go SDK does it for
// typed tools), so the guest splices that part instead and sends the SSN
// to a public upstream.
func TestGuestMCPFieldMirror(t *testing.T) {
	e := newGAEnv(t, gaToken)
	_, _, got := e.run(t, []string{"field_mirror"})
	for key, want := range map[string]string{
		"field_mirror.read": "ESUCCESS", "field_mirror.field": "EFLOW", "field_mirror.text": "EFLOW",
	} {
		if got[key].Errno != want {
			t.Errorf("%s: got %s (%s), want %s", key, got[key].Errno, got[key].Detail, want)
		}
	}
	for _, c := range e.up.Calls() {
		if strings.Contains(c.Args, gaSSN) {
			t.Errorf("the SSN labelled pii:alice reached a public upstream: %s %s", c.Tool, c.Args)
		}
	}
}
