package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/caps/mcp"
	"github.com/mandatevm/mandate/caps/mcp/internal/fixture"
	"github.com/mandatevm/mandate/constraint"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// This file attacks the mcp kind from the upstream's side: a hostile MCP
// server (internal/fixture) answers with garbage, 10 MB, nothing, dies
// mid-call, changes a tool's definition, reports its environment and
// reflects a secret header. Every call goes through a real kernel: a task
// on kerneltest.WaitEngine makes it from Go (Task.Invoke), so each one
// passes the whole pipeline (prepare, reserve, flow, constraints, audit,
// the effect, settle). Each failure must be a clean errno for the task
// (never EINTERNAL, which is what a kind's panic becomes), and the next
// call must work. The fixture records everything it receives, so "nothing
// was sent upstream" is checked on the wire.

// kenv is a kernel with the mcp kind, its audit log in memory, and a task
// holding the grants.
type kenv struct {
	t     testing.TB
	k     *kernel.Kernel
	kind  *mcp.Kind
	task  *kernel.Task
	logs  *kerneltest.Buffer
	audit *memAudit
	gc    kindapi.GrantContext
}

// memAudit keeps every audit event.
type memAudit struct {
	mu     sync.Mutex
	events []kernel.AuditEvent
}

func (a *memAudit) Record(_ context.Context, ev kernel.AuditEvent) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, ev)
	return nil
}

// text is every event, as text, for searching it.
func (a *memAudit) text() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var b strings.Builder
	for _, e := range a.events {
		fmt.Fprintf(&b, "%+v\n", e)
		if e.Effect != nil {
			fmt.Fprintf(&b, "%+v\n", *e.Effect)
		}
	}
	return b.String()
}

// grant is a root grant of the mcp kind: its name, its spec (JSON), and
// the kernel's own when and max_uses.
type grant struct {
	name, spec string
	when       []string
	maxUses    int64
}

// newKenv starts a kernel with the mcp kind and a task holding grants.
// The grants read their environment through os.LookupEnv (t.Setenv what
// they need).
func newKenv(t testing.TB, grants ...grant) *kenv {
	t.Helper()
	e := &kenv{t: t, logs: &kerneltest.Buffer{}, audit: &memAudit{}}
	logger := hclog.New(&hclog.LoggerOptions{Output: e.logs, Level: hclog.Trace})
	e.kind = mcp.New(mcp.WithLogger(logger))
	k, err := kernel.New(kernel.Config{Engine: kerneltest.WaitEngine{}, Kinds: []kindapi.Kind{e.kind},
		Logger: logger, Auditor: e.audit, Constraints: constraint.New()})
	if err != nil {
		t.Fatal(err)
	}
	e.k = k
	var specs []kernel.GrantSpec
	for _, g := range grants {
		specs = append(specs, e.grantSpec(g))
	}
	mod, _ := kerneltest.WaitEngine{}.Compile(context.Background(), nil)
	task, err := k.Start(context.Background(), kernel.TaskSpec{Module: mod, Principal: "alice", Grants: specs,
		Limits: kernel.Limits{MaxHandles: 4096, Timeout: 10 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	e.task = task
	t.Cleanup(func() {
		task.Kill()
		<-task.Done()
		if err := e.kind.Close(); err != nil {
			t.Errorf("Kind.Close: %v", err)
		}
		if s := e.logs.String(); strings.Contains(s, "panicked") {
			t.Errorf("something panicked:\n%s", s)
		}
	})
	return e
}

func (e *kenv) grantSpec(g grant) kernel.GrantSpec {
	e.t.Helper()
	s, err := e.k.Grant(mcp.KindName, e.gc, []byte(g.spec))
	if err != nil {
		e.t.Fatalf("grant %s: %v", g.name, err)
	}
	gs := kernel.GrantSpec{Name: g.name, Kind: mcp.KindName, Scope: s, Audit: true}
	if len(g.when) > 0 {
		if gs.Constraints, err = e.k.CompileConstraints(mcp.KindName, g.when, nil); err != nil {
			e.t.Fatalf("grant %s: when: %v", g.name, err)
		}
	}
	gs.Allowance.MaxUses = g.maxUses
	return gs
}

// definitions asks the kind for the definitions of the tools spec allows,
// as an operator pinning them does.
func definitions(t testing.TB, spec string) []mcp.Definition {
	t.Helper()
	k := mcp.New()
	defer k.Close()
	s, err := k.Grant(kindapi.GrantContext{}, []byte(spec))
	if err != nil {
		t.Fatalf("grant: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	defs, err := k.Definitions(ctx, s)
	if err != nil {
		t.Fatalf("definitions: %v", err)
	}
	return defs
}

// pinsOf returns the pins of tools among defs (every tool named must be
// there).
func pinsOf(t testing.TB, defs []mcp.Definition, tools ...string) map[string]string {
	t.Helper()
	pins := map[string]string{}
	for _, d := range defs {
		if slices.Contains(tools, d.Name) {
			if !strings.HasPrefix(d.Digest, "sha256:") {
				t.Fatalf("definition of %s: digest %q", d.Name, d.Digest)
			}
			pins[d.Name] = d.Digest
		}
	}
	for _, n := range tools {
		if pins[n] == "" {
			t.Fatalf("no definition of %s among %d", n, len(defs))
		}
	}
	return pins
}

// spec builds a grant spec: base (the server: url or command) with the
// fields given.
func spec(base map[string]any, fields map[string]any) string {
	m := maps.Clone(base)
	maps.Copy(m, fields)
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func (e *kenv) lookup(name string) abi.Handle {
	e.t.Helper()
	h, err := e.task.Lookup(context.Background(), name)
	if err != nil {
		e.t.Fatalf("lookup %s: %v", name, err)
	}
	return h
}

// op invokes op on the capability name with args (JSON-encoded unless
// []byte), and returns the result blob's bytes and label.
func (e *kenv) op(name, op string, args any) ([]byte, kindapi.Label, error) {
	e.t.Helper()
	b, ok := args.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(args); err != nil {
			e.t.Fatal(err)
		}
	}
	ctx := context.Background()
	h, err := e.task.Invoke(ctx, e.lookup(name), op, b)
	if err != nil {
		return nil, kindapi.Label{}, err
	}
	if h == 0 {
		return nil, kindapi.Label{}, nil
	}
	label, err := e.task.BlobLabel(h)
	if err != nil {
		return nil, kindapi.Label{}, err
	}
	n, err := e.task.BlobLen(ctx, h)
	if err != nil {
		return nil, kindapi.Label{}, err
	}
	p := make([]byte, n)
	if _, err := e.task.ReadBlob(ctx, h, 0, p); err != nil {
		return nil, kindapi.Label{}, err
	}
	return p, label, nil
}

// call calls tool through the capability name.
func (e *kenv) call(name, tool string, args any) ([]byte, kindapi.Label, error) {
	e.t.Helper()
	req := map[string]any{"tool": tool}
	if args != nil {
		req["arguments"] = args
	}
	return e.op(name, abi.MCPCallOp, req)
}

// mustCall calls tool and fails the test on an error.
func (e *kenv) mustCall(name, tool string, args any) ([]byte, kindapi.Label) {
	e.t.Helper()
	b, l, err := e.call(name, tool, args)
	if err != nil {
		e.t.Fatalf("call %s on %s: %v (errno %v)", tool, name, err, kindapi.ErrnoOf(err))
	}
	return b, l
}

// refused calls tool and checks that it fails with one of want (never
// EINTERNAL: a clean errno), returning the error.
func (e *kenv) refused(name, tool string, args any, want ...abi.Errno) error {
	e.t.Helper()
	b, _, err := e.call(name, tool, args)
	if err == nil {
		e.t.Fatalf("call %s on %s succeeded (%d bytes: %.200q), want %v", tool, name, len(b), b, want)
	}
	if got := kindapi.ErrnoOf(err); !slices.Contains(want, got) {
		e.t.Fatalf("call %s on %s: %v (errno %v), want %v", tool, name, err, got, want)
	}
	return err
}

// callResult is the result blob of call.
type callResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
}

func decodeResult(t testing.TB, b []byte) callResult {
	t.Helper()
	var r callResult
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("result %.300q: %v", b, err)
	}
	return r
}

func (r callResult) text() string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// httpFixture starts the hostile fixture over Streamable HTTP and returns
// it with the base of a grant spec for it.
func httpFixture(t testing.TB) (*fixture.Server, map[string]any) {
	f := fixture.New()
	url := f.Start(t)
	return f, map[string]any{"url": url, "allow_private": true}
}

// stdioFixture returns the base of a grant spec that runs the fixture
// over stdio, logging what it receives to the file returned.
func stdioFixture(t testing.TB) (map[string]any, string) {
	log := filepath.Join(t.TempDir(), "fixture.log")
	return map[string]any{"command": []string{fixture.Binary(t), "-log", log}}, log
}

// pinned is a spec field set granting tools, each pinned as the fixture
// defines it.
func pinned(t testing.TB, base map[string]any, tools ...string) map[string]any {
	defs := definitions(t, spec(base, map[string]any{"tools": tools}))
	return map[string]any{"tools": tools, "pins": pinsOf(t, defs, tools...)}
}

// with returns fields and extra, merged.
func with(fields map[string]any, extra map[string]any) map[string]any {
	m := maps.Clone(fields)
	maps.Copy(m, extra)
	return m
}

// echoes checks that an echo call through name works.
func (e *kenv) echoes(name, text string) {
	e.t.Helper()
	b, _ := e.mustCall(name, fixture.ToolEcho, map[string]any{"text": text})
	if got := decodeResult(e.t, b).text(); got != text {
		e.t.Fatalf("echo %q: got %q", text, got)
	}
}

// TestHostileNothingSent: a tool the grant does not allow, one it allows
// by pattern but did not pin, and a call its when refuses are refused
// (EDENIED) before anything reaches the server: the fixture saw no
// tools/call at all, over HTTP and over stdio.
func TestHostileNothingSent(t *testing.T) {
	refuse := func(t *testing.T, base map[string]any, calls func() int) {
		defs := definitions(t, spec(base, map[string]any{"tools": []string{"*"}}))
		e := newKenv(t, grant{name: "up", spec: spec(base, map[string]any{
			"tools": []string{"e*"},
			"pins":  pinsOf(t, defs, fixture.ToolEcho),
		}), when: []string{"tool != 'echo' || args.text.startsWith('ok')"}})
		e.refused("up", fixture.ToolHang, nil, abi.EDENIED)
		err := e.refused("up", fixture.ToolEnv, nil, abi.EDENIED) // allowed by e*, not pinned
		envDigest := pinsOf(t, defs, fixture.ToolEnv)[fixture.ToolEnv]
		if !strings.Contains(err.Error(), envDigest) {
			t.Errorf("refusal of the unpinned env does not name its digest %s: %v", envDigest, err)
		}
		e.refused("up", fixture.ToolEcho, map[string]any{"text": "not ok"}, abi.EDENIED) // the when
		if n := calls(); n != 0 {
			t.Fatalf("the server saw %d tools/call, want none", n)
		}
		e.echoes("up", "ok, after")
		if n := calls(); n != 1 {
			t.Fatalf("the server saw %d tools/call, want the one echo", n)
		}
	}
	t.Run("http", func(t *testing.T) {
		f, base := httpFixture(t)
		refuse(t, base, func() int { return f.Calls("") })
	})
	t.Run("stdio", func(t *testing.T) {
		base, log := stdioFixture(t)
		refuse(t, base, func() int { return fixture.CountCalls(fixture.ReadLog(t, log), "") })
	})
}

// TestHostileGarbage: a server answering a call with bytes that are not
// JSON-RPC is a clean error (EIO) for the task, over HTTP and over stdio,
// and the next call works (a new connection).
func TestHostileGarbage(t *testing.T) {
	t.Run("http", func(t *testing.T) {
		f, base := httpFixture(t)
		e := newKenv(t, grant{name: "up", spec: spec(base, pinned(t, base, fixture.ToolEcho, fixture.ToolGarbage))})
		e.echoes("up", "before")
		e.refused("up", fixture.ToolGarbage, nil, abi.EIO)
		e.echoes("up", "after")
		if n := f.Calls(fixture.ToolGarbage); n != 1 {
			t.Fatalf("garbage called %d times, want once", n)
		}
	})
	t.Run("stdio", func(t *testing.T) {
		base, log := stdioFixture(t)
		e := newKenv(t, grant{name: "up", spec: spec(base, with(pinned(t, base, fixture.ToolEcho, fixture.ToolGarbage),
			map[string]any{"timeout": "5s"}))})
		e.echoes("up", "before")
		// The SDK may skip a line it cannot parse and read the answer
		// after it: a clean answer is as good as a clean error.
		if b, _, err := e.call("up", fixture.ToolGarbage, nil); err != nil {
			if n := kindapi.ErrnoOf(err); n != abi.EIO && n != abi.ETIMEDOUT {
				t.Fatalf("garbage: %v (errno %v), want EIO or ETIMEDOUT", err, n)
			}
		} else if got := decodeResult(t, b).text(); got != "after garbage" {
			t.Fatalf("garbage answered %q", got)
		}
		e.echoes("up", "after")
		if n := fixture.CountCalls(fixture.ReadLog(t, log), fixture.ToolGarbage); n != 1 {
			t.Fatalf("garbage called %d times, want once", n)
		}
	})
}

// TestHostileBig: a 10 MB answer past max_response_bytes is refused
// (ELIMIT), and the kind never holds it whole: what the process allocated
// during the call stays well below the answer's size. The next call
// works.
func TestHostileBig(t *testing.T) {
	const limit = 256 << 10
	t.Run("http", func(t *testing.T) {
		_, base := httpFixture(t)
		e := newKenv(t, grant{name: "up", spec: spec(base, with(pinned(t, base, fixture.ToolEcho, fixture.ToolBig),
			map[string]any{"max_response_bytes": limit}))})
		e.echoes("up", "warm")
		// A small one fits.
		b, _ := e.mustCall("up", fixture.ToolBig, map[string]any{"bytes": 1000})
		if got := decodeResult(t, b).text(); got != strings.Repeat("A", 1000) {
			t.Fatalf("big of 1000 bytes: %d bytes back", len(got))
		}
		alloc := allocated(func() {
			e.refused("up", fixture.ToolBig, map[string]any{"bytes": fixture.BigDefault}, abi.ELIMIT)
		})
		t.Logf("allocated during the refused 10 MB call: %d KiB", alloc>>10)
		if alloc >= fixture.BigDefault {
			t.Errorf("the call allocated %d bytes: the 10 MB answer was buffered whole (max_response_bytes %d)", alloc, limit)
		}
		e.echoes("up", "after")
	})
	// The same answer as one event of the SDK's event stream (the server
	// holds it whole here: no allocation bound is checked).
	t.Run("http-sse", func(t *testing.T) {
		_, base := httpFixture(t)
		e := newKenv(t, grant{name: "up", spec: spec(base, with(pinned(t, base, fixture.ToolEcho, fixture.ToolBig),
			map[string]any{"max_response_bytes": limit}))})
		e.echoes("up", "warm")
		err := e.refused("up", fixture.ToolBig, map[string]any{"bytes": fixture.BigDefault, "sse": true}, abi.ELIMIT, abi.EIO)
		e.echoes("up", "after")
		sseLimit(t, err)
	})
	t.Run("stdio", func(t *testing.T) {
		base, _ := stdioFixture(t)
		e := newKenv(t, grant{name: "up", spec: spec(base, with(pinned(t, base, fixture.ToolEcho, fixture.ToolBig),
			map[string]any{"max_response_bytes": limit}))})
		e.echoes("up", "warm")
		alloc := allocated(func() {
			e.refused("up", fixture.ToolBig, map[string]any{"bytes": fixture.BigDefault}, abi.ELIMIT)
		})
		t.Logf("allocated during the refused 10 MB call: %d KiB", alloc>>10)
		if alloc >= fixture.BigDefault {
			t.Errorf("the call allocated %d bytes: the 10 MB answer was buffered whole (max_response_bytes %d)", alloc, limit)
		}
		e.echoes("up", "after")
	})
}

// allocated is how many bytes the process allocated while f ran.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestHostileNothing: a server that never answers is ended by the grant's
// timeout (ETIMEDOUT), and the next call works. Over HTTP also an empty
// event stream closed without an answer.
func TestHostileNothing(t *testing.T) {
	const bound = time.Minute // never a tighter wall-clock bound: the machine may be busy
	check := func(t *testing.T, e *kenv, tool string, want ...abi.Errno) {
		start := time.Now()
		e.refused("up", tool, nil, want...)
		if d := time.Since(start); d > bound {
			t.Errorf("%s took %v with a 2s grant timeout", tool, d)
		}
		e.echoes("up", "after "+tool)
	}
	t.Run("http", func(t *testing.T) {
		f, base := httpFixture(t)
		e := newKenv(t, grant{name: "up", spec: spec(base, with(pinned(t, base, fixture.ToolEcho, fixture.ToolHang, fixture.ToolMute),
			map[string]any{"timeout": "2s"}))})
		check(t, e, fixture.ToolHang, abi.ETIMEDOUT)
		check(t, e, fixture.ToolMute, abi.ETIMEDOUT, abi.EIO)
		if n := f.Calls(fixture.ToolHang); n != 1 {
			t.Fatalf("hang called %d times, want once (no retry of a call that may have had an effect)", n)
		}
	})
	t.Run("stdio", func(t *testing.T) {
		base, log := stdioFixture(t)
		e := newKenv(t, grant{name: "up", spec: spec(base, with(pinned(t, base, fixture.ToolEcho, fixture.ToolHang),
			map[string]any{"timeout": "2s"}))})
		check(t, e, fixture.ToolHang, abi.ETIMEDOUT)
		if n := fixture.CountCalls(fixture.ReadLog(t, log), fixture.ToolHang); n != 1 {
			t.Fatalf("hang called %d times, want once", n)
		}
	})
}

// TestHostileDies: a server that dies during a call (stdio: the process
// exits; HTTP: the connection is closed without an answer) is a clean
// error (EIO), and the next call reconnects and works.
func TestHostileDies(t *testing.T) {
	t.Run("http", func(t *testing.T) {
		f, base := httpFixture(t)
		e := newKenv(t, grant{name: "up", spec: spec(base, pinned(t, base, fixture.ToolEcho, fixture.ToolDie))})
		e.echoes("up", "before")
		e.refused("up", fixture.ToolDie, nil, abi.EIO)
		e.echoes("up", "after")
		if n := f.Calls(fixture.ToolDie); n != 1 {
			t.Fatalf("die called %d times, want once (no retry of a call that may have had an effect)", n)
		}
	})
	t.Run("stdio", func(t *testing.T) {
		base, log := stdioFixture(t)
		e := newKenv(t, grant{name: "up", spec: spec(base, pinned(t, base, fixture.ToolEcho, fixture.ToolDie))})
		e.echoes("up", "before")
		e.refused("up", fixture.ToolDie, nil, abi.EIO)
		e.echoes("up", "after")
		seen := fixture.ReadLog(t, log)
		if n := fixture.CountCalls(seen, fixture.ToolDie); n != 1 {
			t.Fatalf("die called %d times, want once", n)
		}
		if n := fixture.Starts(seen); n < 2 {
			t.Fatalf("the server started %d times: the call after its death did not start it again", n)
		}
	})
}

// TestHostileChangedDefinition: once the server changes a pinned tool's
// definition (and says so, tools/list_changed), a call of it is refused
// (EDENIED, naming the new digest) and nothing is sent; a grant re-pinned
// to the new definition calls it.
func TestHostileChangedDefinition(t *testing.T) {
	f, base := httpFixture(t)
	tools := []string{fixture.ToolEcho, fixture.ToolMutable}
	e := newKenv(t, grant{name: "up", spec: spec(base, pinned(t, base, tools...))})
	b, _ := e.mustCall("up", fixture.ToolMutable, nil)
	if got := decodeResult(t, b).text(); got != "mutable v1" {
		t.Fatalf("mutable: %q", got)
	}
	f.SetMutable("v2")
	// The kind learns of the change from the server's tools/list_changed,
	// on its own goroutine: wait for the tools op (which sends no call
	// upstream) to stop listing the tool as pinned.
	deadline := time.Now().Add(time.Minute)
	for {
		b, _, err := e.op("up", abi.MCPToolsOp, map[string]any{})
		if err != nil {
			t.Fatalf("tools: %v", err)
		}
		if !slices.Contains(listedNames(t, b), fixture.ToolMutable) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the change, tools still lists the changed tool as pinned: %s", b)
		}
		time.Sleep(5 * time.Millisecond)
	}
	calls := f.Calls(fixture.ToolMutable)
	err := e.refused("up", fixture.ToolMutable, nil, abi.EDENIED)
	newDigest := pinsOf(t, definitions(t, spec(base, map[string]any{"tools": tools})), fixture.ToolMutable)[fixture.ToolMutable]
	if !strings.Contains(err.Error(), newDigest) {
		t.Errorf("the refusal does not name the new digest %s: %v", newDigest, err)
	}
	if n := f.Calls(fixture.ToolMutable); n != calls {
		t.Fatalf("the changed tool was called upstream (%d calls, %d before)", n, calls)
	}
	e.echoes("up", "unchanged tools still work")

	// Re-pinned.
	e2 := newKenv(t, grant{name: "up", spec: spec(base, pinned(t, base, tools...))})
	b, _ = e2.mustCall("up", fixture.ToolMutable, nil)
	if got := decodeResult(t, b).text(); got != "mutable v2" {
		t.Fatalf("mutable after re-pinning: %q", got)
	}
}

// TestHostileEnv: a stdio server is started with exactly the variables
// the grant's env lists: a secret in mandate's own environment never
// reaches it.
func TestHostileEnv(t *testing.T) {
	const secret = "mandate-test-secret-7fQ2xLp9"
	t.Setenv("MANDATE_TEST_SECRET", secret)
	t.Setenv("MCPFIXTURE_LISTED", "listed-value")
	base, _ := stdioFixture(t)
	base["env"] = []string{"MCPFIXTURE_LISTED"}
	e := newKenv(t, grant{name: "up", spec: spec(base, pinned(t, base, fixture.ToolEcho, fixture.ToolEnv))})
	b, _ := e.mustCall("up", fixture.ToolEnv, nil)
	var got struct {
		Env []string `json:"env"`
	}
	if err := json.Unmarshal(decodeResult(t, b).StructuredContent, &got); err != nil {
		t.Fatalf("env result %.300q: %v", b, err)
	}
	if !slices.Equal(got.Env, []string{"MCPFIXTURE_LISTED=listed-value"}) {
		t.Errorf("the server's environment is %q, want exactly MCPFIXTURE_LISTED=listed-value", got.Env)
	}
	if bytes.Contains(b, []byte(secret)) {
		t.Errorf("the secret in mandate's environment reached the server")
	}
}

// TestHostileSecretHeader: a header whose value is a secret from
// mandate's environment reaches the HTTP server, and never comes back in
// a result, an error, the kernel's logs or the audit log, even from a
// server that reflects its request headers (in a result, a JSON-RPC
// error's message or an HTTP error's body).
func TestHostileSecretHeader(t *testing.T) {
	const secret = "mandate-test-token-Hq8sW3zR1v"
	t.Setenv("MANDATE_TEST_TOKEN", secret)
	f, base := httpFixture(t)
	base["headers"] = []map[string]any{{"name": "X-Api-Key", "env": "MANDATE_TEST_TOKEN"}}
	e := newKenv(t, grant{name: "up", spec: spec(base, pinned(t, base, fixture.ToolEcho, fixture.ToolHeaders, fixture.ToolGarbage))})
	b, _ := e.mustCall("up", fixture.ToolEcho, map[string]any{"text": "hello"})
	reached := false
	for _, s := range f.Seen() {
		if s.Method == "tools/call" && s.Header.Get("X-Api-Key") == secret {
			reached = true
		}
	}
	if !reached {
		t.Fatalf("the secret header did not reach the server with the call: %+v", f.Seen())
	}
	leaks := func(what string, b []byte) {
		t.Helper()
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("the secret is in %s: %.300q", what, b)
		}
	}
	leaks("the echo's result", b)
	// The server reflects its request's headers: refused or scrubbed,
	// never handed to the task.
	b, _, err := e.call("up", fixture.ToolHeaders, nil)
	if err != nil {
		if n := kindapi.ErrnoOf(err); n == abi.EINTERNAL {
			t.Fatalf("headers: %v (EINTERNAL)", err)
		}
		leaks("the error of the reflecting call", []byte(err.Error()))
		t.Logf("the reflecting call was refused: %v", err)
	} else {
		leaks("the reflecting call's result", b)
	}
	// Reflected in a JSON-RPC error's message, and in an HTTP error's body.
	for _, how := range []string{"rpc_error", "http_error"} {
		_, _, err = e.call("up", fixture.ToolHeaders, map[string]any{how: true})
		if err == nil {
			t.Fatalf("headers with %s answered", how)
		}
		if n := kindapi.ErrnoOf(err); n != abi.EIO {
			t.Errorf("headers with %s: %v (errno %v), want EIO", how, err, n)
		}
		leaks("the error of the call reflecting with "+how, []byte(err.Error()))
		t.Logf("%s: %v", how, err)
		e.echoes("up", "after "+how)
	}
	_, _, err = e.call("up", fixture.ToolGarbage, nil)
	if err == nil {
		t.Fatal("garbage answered")
	}
	leaks("the garbage call's error", []byte(err.Error()))
	leaks("the kernel's logs", []byte(e.logs.String()))
	leaks("the audit log", []byte(e.audit.text()))
}

// TestHostileMaxUses: the kernel's max_uses counts calls that reached the
// server; a refused call costs nothing: a tool not allowed (refused in
// Prepare), and an unpinned one on a server not yet listed (refused in the
// effect, after the tools/list, as not performed).
func TestHostileMaxUses(t *testing.T) {
	f, base := httpFixture(t)
	defs := definitions(t, spec(base, map[string]any{"tools": []string{"*"}}))
	e := newKenv(t, grant{name: "up", spec: spec(base, map[string]any{
		"tools": []string{"e*"}, "pins": pinsOf(t, defs, fixture.ToolEcho)}), maxUses: 1})
	e.refused("up", fixture.ToolEnv, nil, abi.EDENIED)  // unpinned, first contact
	e.refused("up", fixture.ToolHang, nil, abi.EDENIED) // not allowed
	e.refused("up", fixture.ToolEnv, nil, abi.EDENIED)  // unpinned, list known
	e.echoes("up", "the one use")
	e.refused("up", fixture.ToolEcho, map[string]any{"text": "a second"}, abi.ELIMIT)
	if n := f.Calls(""); n != 1 {
		t.Fatalf("the server saw %d calls, want 1", n)
	}
}

// TestHostileServerRequests: a stdio server that sends the client
// requests of its own during a call (sampling, its roots, an elicitation;
// written raw, whatever the client declared) gets nothing back: sampling
// and elicitation are answered with an error or not at all, the roots
// with none (the SDK's client answers roots/list with its roots, which
// the kind never gives it). The call ends cleanly and the next one works.
func TestHostileServerRequests(t *testing.T) {
	base, log := stdioFixture(t)
	e := newKenv(t, grant{name: "up", spec: spec(base, with(pinned(t, base, fixture.ToolEcho, fixture.ToolAsk),
		map[string]any{"timeout": "5s"}))})
	e.echoes("up", "before")
	if _, _, err := e.call("up", fixture.ToolAsk, nil); err != nil {
		if n := kindapi.ErrnoOf(err); n != abi.EIO && n != abi.ETIMEDOUT {
			t.Fatalf("ask: %v (errno %v), want success, EIO or ETIMEDOUT", err, n)
		}
		t.Logf("ask: %v", err)
	}
	e.echoes("up", "after")
	answers := fixture.Answers(fixture.ReadLog(t, log))
	for method, id := range fixture.Asks {
		a := answers[id]
		t.Logf("%s: result %s error %s", method, a.Result, a.Error)
		if a.Result == nil {
			continue
		}
		if method != "roots/list" {
			t.Errorf("the client answered the server's %s with a result: %s", method, a.Result)
			continue
		}
		var roots struct {
			Roots []json.RawMessage `json:"roots"`
		}
		if err := json.Unmarshal(a.Result, &roots); err != nil || len(roots.Roots) != 0 {
			t.Errorf("the client gave the server roots: %s", a.Result)
		}
	}
}

// TestHostileConcurrentDeath: calls in flight when a stdio server dies
// each end with a clean errno (or their answer), none with EINTERNAL, and
// the kernel goes on: the next call starts the server again.
func TestHostileConcurrentDeath(t *testing.T) {
	base, log := stdioFixture(t)
	e := newKenv(t, grant{name: "up", spec: spec(base, with(pinned(t, base, fixture.ToolEcho, fixture.ToolDie, fixture.ToolHang),
		map[string]any{"timeout": "5s"}))})
	e.echoes("up", "before")
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tool, args := fixture.ToolEcho, any(map[string]any{"text": fmt.Sprint(i)})
			switch i {
			case 3:
				tool, args = fixture.ToolHang, nil
			case 6:
				tool, args = fixture.ToolDie, nil
			}
			_, _, err := e.call("up", tool, args)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if err == nil {
			continue
		}
		failed++
		switch n := kindapi.ErrnoOf(err); n {
		case abi.EIO, abi.ETIMEDOUT:
		default:
			t.Errorf("a call in flight: %v (errno %v), want EIO or ETIMEDOUT", err, n)
		}
	}
	if failed == 0 {
		t.Fatal("no call failed: die and hang both answered")
	}
	e.echoes("up", "after")
	if n := fixture.Starts(fixture.ReadLog(t, log)); n < 2 {
		t.Fatalf("the server started %d times", n)
	}
}

// TestHostileToolFlood: a server whose tool list grows past the grant's
// max_tools, or whose one definition is larger than max_response_bytes,
// makes a call fail cleanly (ELIMIT) with no tools/call sent; a server
// back to a sane list is called again.
func TestHostileToolFlood(t *testing.T) {
	t.Run("count", func(t *testing.T) {
		f, base := httpFixture(t)
		e := newKenv(t, grant{name: "up", spec: spec(base, with(pinned(t, base, fixture.ToolEcho), map[string]any{"max_tools": 16}))})
		e.echoes("up", "before")
		f.AddTools(100, 10)
		calls := f.Calls("")
		e.refused("up", fixture.ToolEcho, map[string]any{"text": "x"}, abi.ELIMIT)
		if n := f.Calls(""); n != calls {
			t.Fatalf("a call was sent (%d calls, %d before)", n, calls)
		}
	})
	t.Run("size", func(t *testing.T) {
		f, base := httpFixture(t)
		e := newKenv(t, grant{name: "up", spec: spec(base, with(pinned(t, base, fixture.ToolEcho), map[string]any{"max_response_bytes": 64 << 10}))})
		e.echoes("up", "before")
		f.AddTools(1, 1<<20)
		calls := f.Calls("")
		err := e.refused("up", fixture.ToolEcho, map[string]any{"text": "x"}, abi.ELIMIT, abi.EIO)
		if n := f.Calls(""); n != calls {
			t.Fatalf("a call was sent (%d calls, %d before)", n, calls)
		}
		sseLimit(t, err)
	})
}

// sseLimit checks that err, a refusal of an event-stream message larger
// than max_response_bytes, is ELIMIT as the same answer is over stdio or
// as a JSON answer (it was EIO before the kind read the SDK's "SSE event
// exceeded" as a size limit).
func sseLimit(t *testing.T, err error) {
	t.Helper()
	if n := kindapi.ErrnoOf(err); n != abi.ELIMIT {
		t.Fatalf("%v (errno %v), want ELIMIT", err, n)
	}
}
