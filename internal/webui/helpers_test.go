package webui

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/runstore"
)

// The strings a hostile guest puts into everything it can influence.
const (
	xssImg    = `<img src=x onerror=alert(1)>`
	xssScript = `<script>alert(1)</script>`
	termEsc   = "\x1b[31mRED\x1b]8;;http://evil.example\x07link\x1b]8;;\x07\u009b2J\u202eevil"
)

const testToken = "test-token-0123456789abcdefghij"

// hostileRecord is a finished run whose every guest-written string is
// hostile: capability names, scope values, task errors, denial reasons,
// flows, outputs. t1 holds c1 (a grant), derives c2 from it and passes c3
// (derived from c2) to its child t2.
func hostileRecord(id, principal string, started time.Time) runstore.Record {
	label := kindapi.NewLabel([]string{"pii:" + xssImg}, nil)
	return runstore.Record{
		Run: runstore.Run{ID: id, Manifest: "/m/" + xssImg + ".hcl", Task: "task " + xssScript, Module: "/g/guest", Digest: "sha256:00",
			Principal: principal, Engine: "wazero", Started: started, Ended: started.Add(time.Second), Exit: 1, State: "failed",
			Error: "exit 1: " + termEsc},
		Graph: kernel.Graph{
			Tasks: []kernel.GraphTask{
				{ID: "t1", Principal: principal, Module: "sha256:00", State: kernel.TaskFailed, Label: label, Denials: 2, Error: "failed " + xssScript},
				{ID: "t2", Parent: "t1", Principal: principal, Module: "sha256:00", State: kernel.TaskDone, Clearance: &kindapi.Label{}, Error: termEsc},
			},
			Caps: []kernel.GraphCap{
				{ID: "c1", Kind: "net", Name: "web", Holder: "t1", Scope: json.RawMessage(`{"origin":"http://127.0.0.1:1","paths":["/search"]}`),
					Audited: true, When: []string{`request.path != "` + xssImg + `"`},
					View: kernel.CapView{Fields: []kindapi.Detail{{Name: "origin", Value: "http://127.0.0.1:1"}, {Name: "paths", Value: "/search"}}}},
				{ID: "c2", Kind: "net", Holder: "t1", Parent: "c1", Scope: json.RawMessage(`{"paths":["/search/` + strings.ReplaceAll(xssImg, "<", `\u003c`) + `"]}`),
					Rate: "10/s", View: kernel.CapView{Fields: []kindapi.Detail{{Name: "paths", Value: "/search/" + xssImg + termEsc}}, MaxUses: 5, Uses: 2}},
				{ID: "c3", Kind: "net", Name: xssImg, Holder: "t2", Parent: "c2", Scope: json.RawMessage(`{}`), Revoked: true,
					View: kernel.CapView{Passed: true}},
			},
		},
		Denials: []runstore.Denial{
			{Time: started.Add(100 * time.Millisecond), Task: "t1", Principal: principal, Cap: "c1", Kind: "net", Op: "call:fetch" + xssScript,
				Errno: "EDENIED", Reason: "path \"/admin/" + xssImg + "\" is outside the allowed prefixes " + termEsc, Label: label},
			{Time: started.Add(200 * time.Millisecond), Task: "t2", Principal: principal, Cap: "c3", Kind: "net", Op: "call:fetch",
				Errno: "EREVOKED", Reason: "capability c3 was revoked"},
		},
		Flows: []runstore.Flow{
			{Time: started.Add(300 * time.Millisecond), Task: "t1", Cap: "c1", Kind: "net", Op: "call:fetch", Decision: "deny", Errno: "EFLOW", Label: label},
		},
		Outputs: []runstore.Output{
			{Task: "t1", Stream: runstore.StreamResult, Data: []byte("result " + xssImg + termEsc + "\xff\xfe")},
			{Task: "t1", Stream: runstore.StreamStdout, Data: []byte("stdout " + xssScript + "\n"), Truncated: true, Dropped: 10},
			{Task: "t2", Stream: runstore.StreamStdout, Data: []byte("the withheld answer\n"), Withheld: true},
		},
	}
}

// auditRun writes the audit entries of rec (its denials, one allowed call
// and its flow's refusal) and signs a checkpoint.
func auditRun(t *testing.T, log *audit.Log, rec runstore.Record) {
	t.Helper()
	ctx := context.Background()
	a := log.ForRun(rec.Run.ID)
	for _, d := range rec.Denials {
		if err := a.Record(ctx, kernel.AuditEvent{Time: d.Time, Task: d.Task, Principal: d.Principal, Cap: d.Cap, Kind: d.Kind, Op: d.Op,
			Decision: kernel.Deny, Errno: abi.EDENIED, Reason: d.Reason, Label: d.Label}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Record(ctx, kernel.AuditEvent{Time: rec.Run.Started, Task: "t1", Principal: rec.Run.Principal, Cap: "c1", Ancestry: []string{"c1"},
		Kind: "net", Op: "call:fetch", Decision: kernel.Allow, Reason: "allowed " + xssImg}); err != nil {
		t.Fatal(err)
	}
	for _, f := range rec.Flows {
		if err := a.Record(ctx, kernel.AuditEvent{Time: f.Time, Task: f.Task, Cap: f.Cap, Kind: f.Kind, Op: f.Op, Decision: kernel.Decision(f.Decision),
			Errno: abi.EFLOW, Reason: "label {pii:" + xssImg + "} may not flow to http://127.0.0.1:1", Label: f.Label}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := log.Checkpoint(); err != nil {
		t.Fatal(err)
	}
}

// stateWith makes a state directory holding the given runs, each with its
// audit entries, and closes the stores (the UI opens them itself).
func stateWith(t *testing.T, recs ...runstore.Record) string {
	t.Helper()
	dir := t.TempDir()
	st, err := runstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	log, err := audit.Open(dir + "/" + AuditFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := st.Finish(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		auditRun(t, log, r)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// ui is a Server on a loopback httptest server.
type ui struct {
	t    *testing.T
	srv  *httptest.Server
	s    *Server
	host string // host:port
}

func startUI(t *testing.T, o Options) *ui {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	o.Addr = ts.Listener.Addr().String()
	if o.Token == "" {
		o.Token = testToken
	}
	if o.PollInterval == 0 {
		o.PollInterval = 50 * time.Millisecond
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ts.Config.Handler = s
	ts.Start()
	t.Cleanup(func() {
		s.Close()
		ts.Close()
	})
	return &ui{t: t, srv: ts, s: s, host: o.Addr}
}

// request sends method path with the cookie the token buys (cookie
// true), from Host u.host.
func (u *ui) request(method, path string, cookie bool, hdr ...string) *http.Response {
	u.t.Helper()
	req, err := http.NewRequest(method, u.srv.URL+path, nil)
	if err != nil {
		u.t.Fatal(err)
	}
	if cookie {
		req.AddCookie(&http.Cookie{Name: u.s.guard.cookie, Value: testToken})
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		u.t.Fatal(err)
	}
	return resp
}

// get returns the body of a GET with the cookie, which must be 200.
func (u *ui) get(path string) (*http.Response, []byte) {
	u.t.Helper()
	resp := u.request("GET", path, true)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		u.t.Fatalf("GET %s: %s: %s", path, resp.Status, b)
	}
	return resp, b
}

func (u *ui) getJSON(path string, v any) []byte {
	u.t.Helper()
	_, b := u.get(path)
	if err := json.Unmarshal(b, v); err != nil {
		u.t.Fatalf("GET %s: %v: %s", path, err, b)
	}
	return b
}

// stream is an open event stream.
type stream struct {
	resp   *http.Response
	events chan sse
}

type sse struct{ event, data string }

func (u *ui) openStream() *stream {
	u.t.Helper()
	resp := u.request("GET", "/api/events", true)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		u.t.Fatalf("GET /api/events: %s: %s", resp.Status, b)
	}
	s := &stream{resp: resp, events: make(chan sse, 64)}
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		var ev sse
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.event != "" || ev.data != "" {
					s.events <- ev
				}
				ev = sse{}
			case strings.HasPrefix(line, "event: "):
				ev.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	u.t.Cleanup(func() { resp.Body.Close() })
	return s
}

// next returns the next event named name within d, skipping others.
func (s *stream) next(t *testing.T, name string, d time.Duration) sse {
	t.Helper()
	// d is what the event takes on a quiet machine; the wait is a hang
	// guard, never shorter than a minute, so that load cannot fail it.
	d = max(d, time.Minute)
	timeout := time.After(d)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatalf("the stream ended before a %q event", name)
			}
			if ev.event == name {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %q event within %v", name, d)
		}
	}
}
