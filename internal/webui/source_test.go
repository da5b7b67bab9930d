package webui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mandatevm/mandate/runstore"
)

// fakeSource is a RunSource of records in memory, one run of which has
// no record (still running on its node).
type fakeSource struct {
	mu      sync.Mutex
	recs    []runstore.Record // newest first
	running string            // the id of a run without a record
	lists   int
}

func (f *fakeSource) Name() string { return "the fleet on nats://127.0.0.1:1" }

func (f *fakeSource) List(ctx context.Context) ([]SourceRun, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	out := []SourceRun{{Summary: runstore.Summary{Run: runstore.Run{ID: f.running, State: "running", Started: t0.Add(time.Hour)}}, Node: "node-b", Submission: "s-running"}}
	for i, r := range f.recs {
		out = append(out, SourceRun{Summary: runstore.Summary{Run: r.Run, Tasks: len(r.Tasks), Caps: len(r.Caps)}, Caps: r.Caps,
			Node: "node-a", Submission: fmt.Sprintf("s%d", i)})
	}
	return out, nil
}

func (f *fakeSource) Get(ctx context.Context, id string) (*runstore.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id == f.running {
		return nil, fmt.Errorf("%w: run %s is still running on node node-b", ErrNoRecord, id)
	}
	for _, r := range f.recs {
		if r.Run.ID == id || id == "" {
			rec := r
			return &rec, nil
		}
	}
	return nil, fmt.Errorf("%w: no run or submission %s", runstore.ErrNotFound, id)
}

// TestRunSource: a UI over a RunSource (a fleet's, mandate ui --nats)
// lists its runs with their nodes and what each could do, shows a run
// from its record with the outputs the record carries, says 404 for a
// run without a record or unknown, has no approvals or clients, keeps
// its event stream (listing again with no file to watch), and touches no
// file of the working directory.
func TestRunSource(t *testing.T) {
	wd := t.TempDir()
	t.Chdir(wd)
	rec := hostileRecord("20260301T120000Z-aaaaaa", "alice", t0)
	rec.Outputs = []runstore.Output{{Task: "t1", Stream: runstore.StreamResult, Data: []byte("the answer")}}
	src := &fakeSource{recs: []runstore.Record{rec}, running: "20260301T130000Z-bbbbbb"}
	u := startUI(t, Options{Runs: src, StateDir: "/must/not/be/used"})

	var list struct {
		StateDir string `json:"state_dir"`
		Source   string `json:"source"`
		Runs     []struct {
			ID, State, Grants, Node, Submission string
		} `json:"runs"`
		Note string `json:"note"`
	}
	u.getJSON("/api/runs", &list)
	if list.Source != src.Name() || list.StateDir != "" || len(list.Runs) != 2 {
		t.Fatalf("the list: %+v", list)
	}
	if r := list.Runs[0]; r.ID != src.running || r.State != "running" || r.Node != "node-b" || r.Grants != "" {
		t.Errorf("the running run: %+v", r)
	}
	if r := list.Runs[1]; r.ID != rec.Run.ID || r.Node != "node-a" || r.Submission != "s0" || r.Grants != "net: 127.0.0.1:1" {
		t.Errorf("the ended run: %+v (grants: want its one root, c1)", r)
	}

	var run struct {
		Run     struct{ ID string }
		Outputs []struct{ Text string }
		Audit   struct {
			Available bool
			Note      string
		}
	}
	u.getJSON("/api/runs/"+rec.Run.ID, &run)
	if run.Run.ID != rec.Run.ID || len(run.Outputs) != 1 || run.Outputs[0].Text != "the answer" || run.Audit.Available ||
		!strings.Contains(run.Audit.Note, "mandate audit verify --nats") {
		t.Errorf("the run: %+v", run)
	}
	u.getJSON("/api/runs/last", &run)
	if run.Run.ID != rec.Run.ID {
		t.Errorf("last: %s", run.Run.ID)
	}
	for path, want := range map[string]string{
		"/api/runs/" + src.running:          "still running on node node-b",
		"/api/runs/20200101T000000Z-000000": "no run or submission",
		"/api/approvals/a1":                 "no such approval",
		"/api/clients/c1":                   "no such client",
	} {
		resp := u.request("GET", path, true)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), want) {
			t.Errorf("GET %s: %s %s, want 404 and %q", path, resp.Status, b, want)
		}
	}
	var appr struct {
		Pending, Answered []any
		Note              string
	}
	u.getJSON("/api/approvals", &appr)
	if len(appr.Pending)+len(appr.Answered) != 0 || !strings.Contains(appr.Note, "A fleet's runs ask no person") {
		t.Errorf("approvals: %+v", appr)
	}
	var clients struct {
		Clients []any
		Note    string
	}
	u.getJSON("/api/clients", &clients)
	if len(clients.Clients) != 0 || !strings.Contains(clients.Note, "A fleet's UI shows no MCP clients") {
		t.Errorf("clients: %+v", clients)
	}

	// The event stream: ready, and the list is read again (no file says
	// when it changed): a run ended meanwhile is announced.
	s := u.openStream()
	s.next(t, "ready", time.Second)
	src.mu.Lock()
	ended := rec
	ended.Run.ID = src.running
	src.recs = append([]runstore.Record{ended}, src.recs...)
	src.running = "20260301T140000Z-cccccc"
	src.mu.Unlock()
	for {
		ev := s.next(t, "change", SourceRelist)
		if strings.Contains(ev.data, `"list":true`) && strings.Contains(ev.data, "20260301T140000Z-cccccc") {
			break
		}
	}

	if ents, err := os.ReadDir(wd); err != nil || len(ents) != 0 {
		t.Errorf("the working directory: %v %v, want it untouched", ents, err)
	}
	if _, err := os.Stat("/must/not/be/used"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the ignored state directory: %v", err)
	}
}
