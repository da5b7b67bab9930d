package mcpserve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/caps/net"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Hostile clients (issue 13): what a client can send that no model
// should, through the SDK's client and, where the SDK's client will not
// send it, straight into the session. The wire-level ones (garbage,
// frames past the transports' bounds) are in internal/cli, against the
// real "mandate mcp serve".

// hostileRig is a kernel of its own with the mcp-tool guest and the net kind
// only, its logs captured, for sessions the fixture's kernel does not
// make (another kernel, a lower task limit, capabilities with uses).
type hostileRig struct {
	k    *kernel.Kernel
	mod  sandbox.Module
	logs *kerneltest.Buffer
}

func newHostileRig(t testing.TB, maxTasks int) *hostileRig {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs a guest")
	}
	ctx := context.Background()
	eng := testengine.New(t)
	r := &hostileRig{logs: &kerneltest.Buffer{}}
	logger := hclog.New(&hclog.LoggerOptions{Name: "kernel", Level: hclog.Trace, Output: r.logs})
	k, err := kernel.New(kernel.Config{Engine: eng, Kinds: []kindapi.Kind{net.New()}, Logger: logger, MaxTasks: maxTasks})
	if err != nil {
		t.Fatal(err)
	}
	r.k = k
	mod, err := eng.Compile(ctx, guestbuild.MustBuild("../../testdata/guests/mcp-tool", false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mod.Close(context.Background()) })
	r.mod = mod
	return r
}

var hostileSchema = json.RawMessage(`{"type":"object","properties":{"op":{"type":"string"},"text":{"type":"string"},"json":{"type":"boolean"},
	"owner":{"type":"string"},"path":{"type":"string"},"body":{}},"required":["op"]}`)

func (r *hostileRig) tool(name string, caps ...string) *Tool {
	return &Tool{Name: name, Description: name + ".", InputSchema: hostileSchema, Module: r.mod,
		Limits: kernel.Limits{Timeout: 30 * time.Second, Memory: 64 << 20}, Caps: caps}
}

func hostileGrant(t testing.TB, k *kernel.Kernel, name, kind, spec string, a kernel.Allowance) kernel.GrantSpec {
	t.Helper()
	s, err := k.Grant(kind, kindapi.GrantContext{}, []byte(spec))
	if err != nil {
		t.Fatalf("grant %s: %v", name, err)
	}
	return kernel.GrantSpec{Name: name, Kind: kind, Scope: s, Allowance: a}
}

// startHostileSession starts a session task on k holding grants, a Session
// serving tools, and an SDK client connected to it in memory. logs, when
// set, is the session's logger's output.
func startHostileSession(t testing.TB, k *kernel.Kernel, tools []*Tool, grants []kernel.GrantSpec, logs *kerneltest.Buffer) (*Session, *mcp.ClientSession) {
	t.Helper()
	ctx := context.Background()
	clear := kindapi.NewLabel([]string{"pii:alice"}, nil)
	task, err := k.Start(ctx, kernel.TaskSpec{Module: sandbox.IdleModule{}, Principal: "alice", Name: "session",
		Clearance: &clear, Grants: grants, Limits: kernel.Limits{Timeout: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { task.Kill(); <-task.Done() })
	cfg := Config{Kernel: k, Task: task, Tools: tools}
	if logs != nil {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "mcp", Level: hclog.Trace, Output: logs})
	}
	s, err := NewSession(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	if _, err := s.Server().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "hostile-client"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return s, cs
}

// sessionChildren counts the tasks the kernel ran as children of the session
// task, and how many of them still run.
func sessionChildren(k *kernel.Kernel, session *kernel.Task) (all, running int) {
	for _, g := range k.Graph().Tasks {
		if g.Parent == session.ID() {
			all++
			if g.State == kernel.TaskRunning {
				running++
			}
		}
	}
	return all, running
}

// waitSessionIdle waits until no child of session runs.
func waitSessionIdle(t *testing.T, k *kernel.Kernel, session *kernel.Task) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, running := sessionChildren(k, session)
		if running == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d tool tasks still run", running)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hasRawControl reports a byte of s that a terminal or a log reader would
// act on: C0 controls but newline, DEL, and C1 controls and bidi
// overrides in UTF-8.
func hasRawControl(s string) (rune, bool) {
	for _, r := range s {
		switch {
		case r == '\n':
		case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0, r == 0x202e, r == 0x202d, r == 0x2066, r == 0x2067, r == 0x2068:
			return r, true
		case r == '\ufffd':
			return r, true
		}
	}
	return 0, false
}

// TestHostileHugeArguments: arguments past MaxArgBytes are refused
// (ELIMIT) before any task exists. No SDK transport carries them (a
// frame is bounded at mcp.DefaultMaxLineLength, the same 16 MiB), so the
// session's own bound is reached by calling it directly; through the SDK,
// such a call ends the connection, and starts no task either.
func TestHostileHugeArguments(t *testing.T) {
	f := newFixture(t)
	if MaxArgBytes != mcp.DefaultMaxLineLength {
		t.Logf("MaxArgBytes %d, the SDK's frame bound %d", MaxArgBytes, mcp.DefaultMaxLineLength)
	}
	tasks := len(f.k.Graph().Tasks)
	big := func(n int) json.RawMessage {
		prefix := `{"op":"echo","text":"`
		return json.RawMessage(prefix + strings.Repeat("a", n-len(prefix)-2) + `"}`)
	}
	for _, n := range []int{MaxArgBytes + 1, 2 * MaxArgBytes} {
		raw := big(n)
		r := f.s.call(context.Background(), f.s.tools["echo"], &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "echo", Arguments: raw}})
		if !r.IsError || !strings.HasPrefix(text(r), "ELIMIT") || !strings.Contains(text(r), fmt.Sprint(MaxArgBytes)) {
			t.Errorf("arguments of %d bytes: %v %.200s", n, r.IsError, text(r))
		}
	}
	if n := len(f.k.Graph().Tasks); n != tasks {
		t.Fatalf("refused arguments started %d tasks", n-tasks)
	}
	// A document the strict reader refuses (deeper than abi.MaxJSONDepth)
	// is refused too, before any task.
	deep := json.RawMessage(`{"op":"echo","body":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`)
	if r := f.s.call(context.Background(), f.s.tools["echo"], &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "echo", Arguments: deep}}); !r.IsError || !strings.HasPrefix(text(r), "EINVAL") {
		t.Errorf("arguments nested 10001 deep: %v %.200s", r.IsError, text(r))
	}
	// Just under the bound, the session serves it.
	r := f.call("echo", map[string]any{"op": "echo", "text": strings.Repeat("b", 1<<20)})
	if r.IsError || len(text(r)) != 1<<20 {
		t.Fatalf("1 MiB of arguments: %v %.200s", r.IsError, text(r))
	}
	tasks = len(f.k.Graph().Tasks)
	// Through the SDK: the frame is past the transport's bound and the
	// connection ends; no task starts.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := f.cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"op": "echo", "text": strings.Repeat("c", MaxArgBytes+1)}})
	if err == nil {
		t.Fatal("a call of more than 16 MiB was answered")
	}
	t.Logf("the call past the frame bound: %v", err)
	if n := len(f.k.Graph().Tasks); n != tasks {
		t.Errorf("a call past the frame bound started %d tasks", n-tasks)
	}
}

// TestHostileConcurrentCalls: 1,000 tools/call at once on one session,
// half of them spending a capability with 100 uses. Every call is
// answered, with its own result or an ELIMIT (the uses, or the kernel's
// running-task limit); the uses counted are exactly the requests that
// reached the web; every task ends; no goroutine is left behind.
func TestHostileConcurrentCalls(t *testing.T) {
	if kernel.DefaultMaxTasks != 256 {
		t.Logf("kernel.DefaultMaxTasks is %d", kernel.DefaultMaxTasks)
	}
	for _, tc := range []struct {
		name     string
		maxTasks int // 0: the kernel's default
	}{{"default-limit", 0}, {"limit-8", 8}} {
		t.Run(tc.name, func(t *testing.T) { concurrentCalls(t, tc.maxTasks) })
	}
}

func concurrentCalls(t *testing.T, maxTasks int) {
	const calls, uses = 1000, 100
	web := kerneltest.NewRecorder(func(w http.ResponseWriter, r *http.Request, _ kerneltest.Request) {
		fmt.Fprint(w, "results for "+r.URL.Query().Get("q"))
	})
	t.Cleanup(web.Close)
	r := newHostileRig(t, maxTasks)
	grants := []kernel.GrantSpec{hostileGrant(t, r.k, SessionCapName("web_search", "web"), "net",
		`{"origin":"`+web.URL+`","allow_private":true,"methods":["GET"],"paths":["/search"]}`, kernel.Allowance{MaxUses: uses})}
	s, cs := startHostileSession(t, r.k, []*Tool{r.tool("echo"), r.tool("web_search", "web")}, grants, nil)
	webCap, _ := s.Task().CapByName(SessionCapName("web_search", "web"))

	// One call first, so the client, the engine and the connection have
	// their goroutines before the baseline.
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"op": "echo", "text": "warm"}}); err != nil || res.IsError {
		t.Fatalf("warm-up: %v %v", err, res)
	}
	runtime.GC()
	baseline := runtime.NumGoroutine()

	type outcome struct {
		res *mcp.CallToolResult
		err error
	}
	out := make([]outcome, calls)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			p := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"op": "echo", "text": fmt.Sprintf("call %d", i)}}
			if i%2 == 1 {
				p = &mcp.CallToolParams{Name: "web_search", Arguments: map[string]any{"op": "fetch", "path": fmt.Sprintf("/search?q=%d", i)}}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := cs.CallTool(ctx, p)
			out[i] = outcome{res, err}
		}()
	}
	began := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(began)

	var ok, runLimit, useLimit, webOK int
	for i, o := range out {
		if o.err != nil {
			t.Errorf("call %d: not answered: %v", i, o.err)
			continue
		}
		got := text(o.res)
		want := fmt.Sprintf("call %d", i)
		if i%2 == 1 {
			want = fmt.Sprintf("results for %d", i)
		}
		switch {
		case !o.res.IsError && got == want:
			ok++
			if i%2 == 1 {
				webOK++
			}
		case o.res.IsError && strings.HasPrefix(got, "ELIMIT") && strings.Contains(got, "tasks are running (the kernel's limit is"):
			runLimit++
		case o.res.IsError && i%2 == 1 && strings.HasPrefix(got, "ELIMIT") && strings.Contains(got, fmt.Sprintf("all %d uses spent", uses)):
			useLimit++
		default:
			t.Errorf("call %d: %v %q, want %q or an ELIMIT", i, o.res.IsError, got, want)
		}
	}
	t.Logf("%d calls in %v: %d answered with their result (%d of them on the web), %d refused at the kernel's task limit, %d past the capability's uses",
		calls, elapsed, ok, webOK, runLimit, useLimit)
	if maxTasks > 0 && runLimit == 0 {
		t.Errorf("no call met the kernel's limit of %d running tasks", maxTasks)
	}
	// Of the web calls that got past the task limit, the first `uses`
	// were served and every later one refused.
	if webOK != min(uses, webOK+useLimit) {
		t.Errorf("%d calls on a capability of %d uses: %d shown results, %d refused past its uses",
			calls/2, uses, webOK, useLimit)
	}

	waitSessionIdle(t, r.k, s.Task())
	// Uses: what the capability's subtree used is exactly what reached
	// the web, within its bound, and every call that was shown results.
	u, _ := webCap.Usage()
	reqs := len(web.Requests())
	if u.Uses != int64(reqs) || u.Uses > uses || int64(webOK) != u.Uses {
		t.Errorf("uses %d of %d, %d requests reached the web, %d calls were shown results", u.Uses, u.MaxUses, reqs, webOK)
	}
	// Every started task is a child of the session, counted once, and
	// none still runs.
	all, running := sessionChildren(r.k, s.Task())
	s.mu.Lock()
	started := s.calls
	s.mu.Unlock()
	if all != started || running != 0 || started != ok+useLimit+1 {
		t.Errorf("%d child tasks (%d running), the session counted %d starts, %d calls got past the kernel's limit (+1 warm-up)",
			all, running, started, ok+useLimit)
	}
	if useLimit > 0 {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "web_search", Arguments: map[string]any{"op": "fetch", "path": "/search?q=more"}})
		if err != nil || !res.IsError || !strings.Contains(text(res), "uses spent") {
			t.Errorf("a web call once the uses are spent: %v %v", err, res)
		}
	}
	// The session still serves, and no goroutine was left behind.
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"op": "echo", "text": "after"}}); err != nil || res.IsError || text(res) != "after" {
		t.Fatalf("a call after the storm: %v %v", err, res)
	}
	waitSessionIdle(t, r.k, s.Task())
	// The net kind's idle keep-alive connections to the recorder are a
	// bounded pool, not a leak: the recorder drops them.
	web.CloseClientConnections()
	var n int
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		runtime.GC()
		if n = runtime.NumGoroutine(); n <= baseline+10 || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("goroutines: %d before the calls, %d after", baseline, n)
	if n > baseline+10 {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines left behind (%d before, %d after):\n%s", n-baseline, baseline, n, buf[:runtime.Stack(buf, true)])
	}
}

// TestHostileCallAfterCancel: a client that cancels calls (its task
// killed) is served as before by the next call, on the same tool and on
// another; the canceled tasks end killed, the session task runs on.
func TestHostileCallAfterCancel(t *testing.T) {
	f := newFixture(t)
	for i := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := f.cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"op": "spin"}})
			errc <- err
		}()
		// Cancel once the task runs.
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, running := sessionChildren(f.k, f.s.Task()); running > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the spinning call's task did not start")
			}
		}
		cancel()
		select {
		case err := <-errc:
			if err == nil {
				t.Fatal("a canceled call returned a result")
			}
		case <-time.After(time.Minute):
			t.Fatal("a canceled call did not return")
		}
		waitSessionIdle(t, f.k, f.s.Task())
		want := fmt.Sprintf("after cancel %d", i)
		if r := f.call("echo", map[string]any{"op": "echo", "text": want}); r.IsError || text(r) != want {
			t.Fatalf("echo after cancel %d: %v %q", i, r.IsError, text(r))
		}
		if r := f.call("my_benefits", map[string]any{"op": "read", "owner": "alice"}); r.IsError || !strings.Contains(text(r), "Gold PPO") {
			t.Fatalf("my_benefits after cancel %d: %q", i, text(r))
		}
	}
	killed := 0
	for _, g := range f.k.Graph().Tasks {
		if g.Parent == f.s.Task().ID() && g.State == kernel.TaskKilled {
			killed++
		}
	}
	if killed != 3 {
		t.Errorf("%d tool tasks ended killed, want the 3 canceled", killed)
	}
	if st := f.s.Task().State(); st != kernel.TaskRunning {
		t.Errorf("the session task is %s after its calls were canceled", st)
	}
	// A call canceled before it is even sent starts nothing.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tasks := len(f.k.Graph().Tasks)
	if _, err := f.cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"op": "spin"}}); err == nil {
		t.Error("a call canceled before it was sent returned")
	}
	waitSessionIdle(t, f.k, f.s.Task())
	if r := f.call("echo", map[string]any{"op": "echo", "text": "last"}); r.IsError || text(r) != "last" {
		t.Fatalf("echo at the end: %q", text(r))
	}
	t.Logf("tasks started by the pre-canceled call and the last: %d", len(f.k.Graph().Tasks)-tasks)
}

// TestHostileToolNames: a tools/call whose name carries control
// characters, a terminal escape or a forged log line is an error, starts
// no task, and reaches neither the kernel's nor the session's logs raw.
func TestHostileToolNames(t *testing.T) {
	r := newHostileRig(t, 0)
	logs := r.logs
	_, cs := startHostileSession(t, r.k, []*Tool{r.tool("echo")}, nil, logs)
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"op": "echo", "text": "hi"}}); err != nil || res.IsError {
		t.Fatalf("echo: %v %v", err, res)
	}
	tasks := len(r.k.Graph().Tasks)
	for _, name := range []string{
		"echo\x00", "\x1b[2J\x1b[Hecho", "echo\r\n2026-12-01T00:00:00Z [INFO]  mandate: forged: ok", "ec\u202eho", "echo\x07\x08",
		"\u009becho", "echo\x7f", strings.Repeat("\x1b", 4096), "", " echo", "ECHO",
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"op": "echo", "text": "x"}})
		switch {
		case err != nil:
			if !strings.Contains(err.Error(), "unknown tool") {
				t.Errorf("tools/call %q: %v, want unknown tool", name, err)
			}
			if c, bad := hasRawControl(err.Error()); bad {
				t.Errorf("the error for %q carries %U raw: %q", name, c, err.Error())
			}
		case res.IsError:
			if c, bad := hasRawControl(text(res)); bad {
				t.Errorf("the tool error for %q carries %U raw: %q", name, c, text(res))
			}
		default:
			t.Errorf("tools/call %q was served: %q", name, text(res))
		}
	}
	if n := len(r.k.Graph().Tasks); n != tasks {
		t.Errorf("calls of unknown tools started %d tasks", n-tasks)
	}
	if c, bad := hasRawControl(logs.String()); bad {
		t.Errorf("the logs carry %U raw:\n%q", c, logs.String())
	}
	if strings.Contains(logs.String(), "forged") {
		t.Errorf("a forged line reached the logs:\n%s", logs.String())
	}
}

// TestHostileForeignReference: a reference is good only in the session
// that made it. Session A's reference, passed to session B on the same
// kernel, or to a session on another kernel, is refused (EBADHANDLE),
// reaches no sink, and no task of B holds A's blob; near misses of A's
// own reference are refused in A.
func TestHostileForeignReference(t *testing.T) {
	f := newFixture(t)
	r := f.call("benefits_ref", map[string]any{"op": "read", "owner": "alice"})
	if r.IsError || !strings.HasPrefix(text(r), RefScheme) {
		t.Fatalf("benefits_ref: %s", text(r))
	}
	ref := strings.Fields(text(r))[0]
	id := strings.TrimPrefix(ref, RefScheme)
	f.s.mu.Lock()
	blob := f.s.refs[id]
	f.s.mu.Unlock()
	if blob == nil {
		t.Fatal("session A keeps no blob under its reference")
	}

	mailGrant := func(k *kernel.Kernel, url string) kernel.GrantSpec {
		return hostileGrant(t, k, SessionCapName("send_email", "mail"), "net",
			`{"origin":"`+url+`","allow_private":true,"methods":["POST"],"paths":["/send"],"clearance":["pii:alice"]}`, kernel.Allowance{})
	}
	// B: another session on A's kernel, with the same mail tool.
	sb, csb := startHostileSession(t, f.k, []*Tool{f.s.tools["send_email"], f.s.tools["echo"]}, []kernel.GrantSpec{mailGrant(f.k, f.mail.URL)}, nil)
	// C: a session on another kernel.
	other := newHostileRig(t, 0)
	mail2 := kerneltest.NewRecorder(func(w http.ResponseWriter, r *http.Request, _ kerneltest.Request) { fmt.Fprint(w, "queued") })
	t.Cleanup(mail2.Close)
	sc, csc := startHostileSession(t, other.k, []*Tool{other.tool("send_email", "mail")}, []kernel.GrantSpec{mailGrant(other.k, mail2.URL)}, nil)

	for _, c := range []struct {
		name string
		k    *kernel.Kernel
		s    *Session
		cs   *mcp.ClientSession
	}{{"same kernel", f.k, sb, csb}, {"another kernel", other.k, sc, csc}} {
		before := len(c.k.Graph().Tasks)
		for _, body := range []any{ref, []any{"x", ref}, map[string]any{"nested": ref}} {
			res, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "send_email", Arguments: map[string]any{"op": "post", "path": "/send", "body": body}})
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if !res.IsError || !strings.HasPrefix(text(res), "EBADHANDLE") || !strings.Contains(text(res), "not a reference of this session") {
				t.Errorf("%s: A's reference in %v: %v %q", c.name, body, res.IsError, text(res))
			}
		}
		if n := len(c.k.Graph().Tasks); n != before {
			t.Errorf("%s: a foreign reference started %d tasks", c.name, n-before)
		}
		if l := c.s.Task().Label(); !l.IsZero() {
			t.Errorf("%s: the session's label rose to %v", c.name, l)
		}
		c.s.mu.Lock()
		held := len(c.s.refs)
		c.s.mu.Unlock()
		if held != 0 {
			t.Errorf("%s: the session keeps %d references", c.name, held)
		}
		// Still serving, with its own, good calls.
		if res, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "send_email", Arguments: map[string]any{"op": "post", "path": "/send", "body": "plain"}}); err != nil || res.IsError {
			t.Errorf("%s: a plain send after the refusals: %v %v", c.name, err, res)
		}
	}
	// Nothing of A's blob reached either mail API: only the two plain
	// sends.
	for _, rec := range []*kerneltest.Recorder{f.mail, mail2} {
		reqs := rec.Requests()
		if len(reqs) != 1 || string(reqs[0].Body) != "plain" {
			t.Errorf("a mail API got %v", reqs)
		}
	}
	// Near misses of A's own reference, in A: refused alike.
	for _, bad := range []string{RefScheme + strings.ToUpper(id), RefScheme + id + "x", RefScheme + id[:len(id)-1], RefScheme, RefScheme + "../" + id, text(r)} {
		res := f.call("send_email", map[string]any{"op": "post", "path": "/send", "body": bad})
		if !res.IsError || !strings.HasPrefix(text(res), "EBADHANDLE") {
			t.Errorf("near miss %q: %v %q", bad, res.IsError, text(res))
		}
		if c, ctl := hasRawControl(text(res)); ctl {
			t.Errorf("near miss %q: %U raw in %q", bad, c, text(res))
		}
	}
	if n := len(f.mail.Requests()); n != 1 {
		t.Errorf("near misses reached the mail API: %d requests", n)
	}
}

// TestHostileRefusedCallsLeaveNoCapabilities: a call refused after its
// task was built (a foreign reference: EBADHANDLE; the kernel's task
// limit: ELIMIT) leaves no capability behind in the kernel's graph that
// is held by a task that never ran.
func TestHostileRefusedCallsLeaveNoCapabilities(t *testing.T) {
	f := newFixture(t)
	for range 5 {
		res := f.call("send_email", map[string]any{"op": "post", "path": "/send", "body": RefScheme + strings.Repeat("cd", 16)})
		if !res.IsError || !strings.HasPrefix(text(res), "EBADHANDLE") {
			t.Fatalf("a foreign reference: %q", text(res))
		}
	}
	orphans := orphanCaps(f.k)
	// A kernel whose one running task is the session: every call is
	// refused at Start (ELIMIT), after its capabilities were passed.
	r := newHostileRig(t, 1)
	grants := []kernel.GrantSpec{hostileGrant(t, r.k, SessionCapName("web_search", "web"), "net",
		`{"origin":"`+f.web.URL+`","allow_private":true,"methods":["GET"],"paths":["/search"]}`, kernel.Allowance{})}
	_, cs := startHostileSession(t, r.k, []*Tool{r.tool("web_search", "web")}, grants, nil)
	for range 5 {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "web_search", Arguments: map[string]any{"op": "fetch", "path": "/search?q=x"}})
		if err != nil || !res.IsError || !strings.HasPrefix(text(res), "ELIMIT") {
			t.Fatalf("a call past the kernel's task limit: %v %v", err, res)
		}
	}
	orphans = append(orphans, orphanCaps(r.k)...)
	if len(orphans) > 0 {
		t.Errorf("10 refused calls left %d live capabilities held by tasks that never ran:\n%s", len(orphans), strings.Join(orphans, "\n"))
	}
}

// orphanCaps lists the live capabilities of k's graph whose holder is no
// task of the graph.
func orphanCaps(k *kernel.Kernel) []string {
	g := k.Graph()
	tasks := map[string]bool{}
	for _, tk := range g.Tasks {
		tasks[tk.ID] = true
	}
	var orphans []string
	for _, c := range g.Caps {
		if !tasks[c.Holder] && !c.Revoked {
			orphans = append(orphans, fmt.Sprintf("%s %q held by %s (parent %s, passed %v)", c.ID, c.Name, c.Holder, c.Parent, c.View.Passed))
		}
	}
	return orphans
}

// TestHostileRequestState: a retry naming a request state no call of the
// session handed out (made up, or control characters, or huge) is an
// error and runs nothing.
func TestHostileRequestState(t *testing.T) {
	f := newFixture(t)
	tasks := len(f.k.Graph().Tasks)
	for _, state := range []string{strings.Repeat("ab", 16), "\x1b[2J\r\nforged", strings.Repeat("z", 1<<20)} {
		res, err := f.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", RequestState: state,
			Arguments: map[string]any{"op": "echo", "text": "x"}})
		if err != nil {
			t.Fatalf("a made-up request state: %v", err)
		}
		if !res.IsError || !strings.HasPrefix(text(res), "EINVAL") {
			t.Errorf("a made-up request state %.20q: %v %.200q", state, res.IsError, text(res))
		}
		if c, bad := hasRawControl(text(res)); bad {
			t.Errorf("%U raw in %q", c, text(res))
		}
	}
	if n := len(f.k.Graph().Tasks); n != tasks {
		t.Errorf("made-up request states started %d tasks", n-tasks)
	}
	if r := f.call("echo", map[string]any{"op": "echo", "text": "still"}); r.IsError || text(r) != "still" {
		t.Errorf("echo after: %q", text(r))
	}
}
