package webui

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/runstore"
)

// TestUIEventsOnChange: while a stream is open, a run that begins (in
// another connection to the store, as another process), a snapshot of it
// (a live MCP session), its end and new audit entries each reach the
// stream as a change naming the run; the JSON then shows the new state.
func TestUIEventsOnChange(t *testing.T) {
	dir := twoRuns(t)
	u := startUI(t, Options{StateDir: dir})
	s := u.openStream()
	s.next(t, "ready", 5*time.Second)

	st, err := runstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	const runC = "20260301T121000Z-cccccc"
	rec := hostileRecord(runC, "carol", t0.Add(10*time.Minute))
	rec.Run.State, rec.Run.Ended = runstore.StateRunning, time.Time{}

	wait := func(what string, ok func(change) bool) change {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case ev, open := <-s.events:
				if !open {
					t.Fatalf("%s: the stream ended", what)
				}
				if ev.event != "change" {
					continue
				}
				var c change
				if err := json.Unmarshal([]byte(ev.data), &c); err != nil {
					t.Fatalf("%s: %v: %s", what, err, ev.data)
				}
				if ok(c) {
					return c
				}
			case <-deadline:
				t.Fatalf("%s: no change event within 10s", what)
			}
		}
	}
	names := func(id string) func(change) bool {
		return func(c change) bool { return slices.Contains(c.Runs, id) }
	}

	start := time.Now()
	if err := st.Begin(ctx, rec.Run); err != nil {
		t.Fatal(err)
	}
	c := wait("a run began", names(runC))
	t.Logf("a run began: an event after %v: %+v", time.Since(start).Round(time.Millisecond), c)
	if !c.List {
		t.Errorf("a new run: the list did not change: %+v", c)
	}
	var rv runsView
	u.getJSON("/api/runs", &rv)
	if len(rv.Runs) != 3 || rv.Runs[0].ID != runC || rv.Runs[0].State != runstore.StateRunning {
		t.Errorf("after Begin: %+v", rv.Runs[0])
	}

	// A snapshot that changes only a capability's uses: the running run
	// is named all the same.
	rec.Caps[1].View.Uses = 4
	start = time.Now()
	if err := st.Snapshot(ctx, rec); err != nil {
		t.Fatal(err)
	}
	wait("a snapshot", names(runC))
	t.Logf("a snapshot: an event after %v", time.Since(start).Round(time.Millisecond))
	var v runView
	u.getJSON("/api/runs/"+runC, &v)
	if v.Caps[1].Uses != 4 || v.Run.State != runstore.StateRunning {
		t.Errorf("after the snapshot: uses %d, state %s", v.Caps[1].Uses, v.Run.State)
	}

	rec.Run.State, rec.Run.Ended, rec.Run.Exit = "done", rec.Run.Started.Add(time.Second), 0
	if err := st.Finish(ctx, rec); err != nil {
		t.Fatal(err)
	}
	wait("the run ended", names(runC))
	u.getJSON("/api/runs/"+runC, &v)
	if v.Run.State != "done" || v.Run.Exit == nil || *v.Run.Exit != 0 {
		t.Errorf("after Finish: %+v", v.Run)
	}

	log, err := audit.Open(u.s.stores.auditPath())
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	if err := log.ForRun(runC).Record(ctx, kernel.AuditEvent{Task: "t1", Cap: "c1", Kind: "net", Op: "call:fetch", Decision: kernel.Allow}); err != nil {
		t.Fatal(err)
	}
	wait("an audit entry", func(c change) bool { return c.Audit })
	u.getJSON("/api/runs/"+runC, &v)
	if v.Audit.Total != 1 || v.Audit.Covered {
		t.Errorf("after an unsigned entry: %d entries, covered %v: %s", v.Audit.Total, v.Audit.Covered, v.Audit.Coverage)
	}
}

// TestUIEventsBounded: at most MaxClients streams are open; the next is
// refused; the poller runs only while a stream is open.
func TestUIEventsBounded(t *testing.T) {
	u := startUI(t, Options{StateDir: twoRuns(t), MaxClients: 2})
	if u.s.live.polling() {
		t.Fatal("polling with no stream open")
	}
	a, b := u.openStream(), u.openStream()
	a.next(t, "ready", 5*time.Second)
	b.next(t, "ready", 5*time.Second)
	resp := u.request("GET", "/api/events", true)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a third stream: %s, want 503", resp.Status)
	}
	if !u.s.live.polling() {
		t.Error("not polling with streams open")
	}
	a.resp.Body.Close()
	b.resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for u.s.live.streams() > 0 || u.s.live.polling() {
		if time.Now().After(deadline) {
			t.Fatalf("after the streams closed: %d open, polling %v", u.s.live.streams(), u.s.live.polling())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Close ends the streams still open.
	c := u.openStream()
	c.next(t, "ready", 5*time.Second)
	u.s.Close()
	select {
	case _, open := <-c.events:
		for open {
			_, open = <-c.events
		}
	case <-time.After(time.Minute):
		t.Error("Close left a stream open")
	}
}

// TestUIListen: only loopback addresses are listened on.
func TestUIListen(t *testing.T) {
	for _, addr := range []string{":0", "0.0.0.0:0", "[::]:0", "192.0.2.1:0", "8.8.8.8:0", "127.0.0.1", "nonsense"} {
		if ln, err := Listen(addr); err == nil {
			ln.Close()
			t.Errorf("Listen(%q) listened", addr)
		} else {
			t.Logf("Listen(%q): %v", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0"} {
		ln, err := Listen(addr)
		if err != nil {
			t.Errorf("Listen(%q): %v", addr, err)
			continue
		}
		host, _, _ := net.SplitHostPort(ln.Addr().String())
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			t.Errorf("Listen(%q) listens on %s", addr, ln.Addr())
		}
		ln.Close()
	}
	if _, err := New(Options{StateDir: t.TempDir(), Token: testToken, Addr: "0.0.0.0:80"}); err == nil {
		t.Error("New accepted a non-loopback address")
	}
	if _, err := New(Options{StateDir: t.TempDir(), Token: "short", Addr: "127.0.0.1:80"}); err == nil {
		t.Error("New accepted a short token")
	}
	tok, err := NewToken()
	if err != nil || len(tok) < 43 || strings.ContainsAny(tok, "+/=") {
		t.Errorf("NewToken: %q, %v", tok, err)
	}
	if tok2, _ := NewToken(); tok2 == tok {
		t.Error("two tokens alike")
	}
}
