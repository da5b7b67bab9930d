package webui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/runstore"
)

// bigState is a state directory with one run of caps capabilities (a
// derivation chain of depth 8 per grant), denials denials and as many
// audit entries.
func bigState(b *testing.B, caps, denials int) string {
	b.Helper()
	dir := b.TempDir()
	rec := runstore.Record{Run: runstore.Run{ID: runA, Manifest: "m.hcl", Task: "big", Principal: "alice", Started: t0, Ended: t0.Add(time.Minute), State: "done"},
		Graph: kernel.Graph{Tasks: []kernel.GraphTask{{ID: "t1", Principal: "alice", State: kernel.TaskDone}}}}
	for i := range caps {
		c := kernel.GraphCap{ID: fmt.Sprintf("c%d", i+1), Kind: "net", Holder: "t1", Scope: json.RawMessage(`{"paths":["/x"]}`),
			View: kernel.CapView{Fields: []kindapi.Detail{{Name: "paths", Value: "/x"}}}}
		if i%8 != 0 {
			c.Parent = fmt.Sprintf("c%d", i)
		}
		rec.Caps = append(rec.Caps, c)
	}
	st, err := runstore.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	log, err := audit.Open(dir + "/" + AuditFile)
	if err != nil {
		b.Fatal(err)
	}
	a := log.ForRun(runA)
	for i := range denials {
		d := runstore.Denial{Time: t0.Add(time.Duration(i) * time.Millisecond), Task: "t1", Cap: fmt.Sprintf("c%d", i%caps+1), Kind: "net",
			Op: "call:fetch", Errno: "EDENIED", Reason: "path \"/admin\" is outside the allowed prefixes [/x]"}
		rec.Denials = append(rec.Denials, d)
		if err := a.Record(context.Background(), kernel.AuditEvent{Time: d.Time, Task: d.Task, Cap: d.Cap, Kind: d.Kind, Op: d.Op,
			Decision: kernel.Deny, Reason: d.Reason}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := log.Checkpoint(); err != nil {
		b.Fatal(err)
	}
	if err := st.Finish(context.Background(), rec); err != nil {
		b.Fatal(err)
	}
	st.Close()
	log.Close()
	return dir
}

// BenchmarkRunPage is GET /api/runs/ID for a run of 500 capabilities and
// 5,000 denials and audit entries (the log verified once, then cached).
func BenchmarkRunPage(b *testing.B) {
	dir := bigState(b, 500, 5000)
	ts := httptest.NewUnstartedServer(nil)
	s, err := New(Options{StateDir: dir, Token: testToken, Addr: ts.Listener.Addr().String()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	req := httptest.NewRequest("GET", "http://"+ts.Listener.Addr().String()+"/api/runs/"+runA, nil)
	req.AddCookie(&http.Cookie{Name: s.guard.cookie, Value: testToken})
	ts.Close()
	var size int
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("%d: %s", w.Code, w.Body)
		}
		size = w.Body.Len()
	}
	b.ReportMetric(float64(size), "bytes/page")
}

// BenchmarkVerify is one verification of a 5,000-entry log (what the run
// page costs when the log changed).
func BenchmarkVerify(b *testing.B) {
	dir := bigState(b, 10, 5000)
	st := newStores(dir, nil, hclog.NewNullLogger())
	defer st.close()
	log, err := st.auditLog()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := log.Verify(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPoll is one look at the stores while nothing changed (what an
// open page costs every PollInterval).
func BenchmarkPoll(b *testing.B) {
	dir := bigState(b, 10, 10)
	st := newStores(dir, nil, hclog.NewNullLogger())
	defer st.close()
	p := &poller{stores: st}
	p.step(context.Background())
	b.ReportAllocs()
	for b.Loop() {
		if _, changed := p.step(context.Background()); changed {
			b.Fatal("a change")
		}
	}
}
