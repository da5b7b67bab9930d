package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/fleet"
	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/natstest"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/internal/webui"
)

// fleetNode runs a node named name of the fleet at url, on its own state
// directory, until the test ends; it returns that directory.
func fleetNode(t *testing.T, url, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), natstest.Timeout)
	defer cancel()
	nc, f, err := fleet.Connect(ctx, url, 1)
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	h, err := host.Open(context.Background(), host.Options{StateDir: state, Engine: testengine.Name(), CacheDir: testCache()})
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(context.Background())
	n := &fleet.Node{Name: name, Fleet: f, Host: h, WorkDir: t.TempDir()}
	done := make(chan error, 1)
	go func() { done <- n.Run(rctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("node %s: %v", name, err)
		}
		h.Close()
		nc.Close()
	})
	return state
}

// mandate runs the CLI in this process.
func mandate(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// TestGraphNats: runs submitted to a fleet are shown by "mandate graph
// --nats" by run id, submission id and "last", with the very graph the
// node's own records give ("mandate graph --state-dir" there); an unknown
// run and an unreachable NATS are errors that say so.
func TestGraphNats(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a fleet")
	}
	t.Setenv("MANDATE_CACHE_DIR", testCache())
	srv := natstest.Start(t)
	url := srv.ClientURL()
	state := fleetNode(t, url, "node-a")
	dir := t.TempDir()
	bob := filepath.Join(dir, "bob.in")
	if err := os.WriteFile(bob, []byte("bob"), 0o644); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join("..", "..", "examples", "benefits", "alice.hcl")

	// Alice's own record, then Bob's (a denial).
	if code, out, errs := mandate("run", "--nats", url, manifest, "--log-level", "off"); code != 0 || !strings.Contains(out, "plan=Gold PPO") {
		t.Fatalf("mandate run --nats: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, out, errs := mandate("run", "--nats", url, manifest, "--input", bob, "--log-level", "off"); code != 0 || !strings.Contains(out, "denied") {
		t.Fatalf("mandate run --nats (bob): exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, out, errs := mandate("runs", "--nats", url, "--format", "json")
	if code != 0 {
		t.Fatalf("mandate runs --nats: exit %d: %s", code, errs)
	}
	var states []fleet.RunState
	if err := json.Unmarshal([]byte(out), &states); err != nil || len(states) != 2 {
		t.Fatalf("mandate runs --nats: %v: %s", err, out)
	}
	last, first := states[0], states[1] // newest first
	if last.RunID == "" || first.RunID == "" || last.Node != "node-a" {
		t.Fatalf("states: %+v", states)
	}

	// The fleet's graph is the node's, whichever name the run goes by.
	for _, tc := range []struct{ name, id, want string }{
		{"last", "last", last.RunID},
		{"run id", first.RunID, first.RunID},
		{"submission id", first.ID, first.RunID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, got, errs := mandate("graph", tc.id, "--nats", url, "--format", "json")
			if code != 0 {
				t.Fatalf("mandate graph %s --nats: exit %d: %s", tc.id, code, errs)
			}
			code, want, errs := mandate("graph", tc.want, "--state-dir", state, "--format", "json")
			if code != 0 {
				t.Fatalf("mandate graph %s --state-dir (the node's): exit %d: %s", tc.want, code, errs)
			}
			if got != want {
				t.Errorf("graph --nats:\n%s\nthe node's own:\n%s", got, want)
			}
		})
	}
	// The text and the picture.
	if code, out, errs := mandate("graph", "--nats", url); code != 0 || !strings.Contains(out, "run "+last.RunID) ||
		!strings.Contains(out, "denials:") || !strings.Contains(out, `c1 data "benefits"`) {
		t.Errorf("mandate graph --nats: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	svgOut := filepath.Join(dir, "g.svg")
	if code, _, errs := mandate("graph", first.RunID, "--nats", url, "--format", "svg", "--output", svgOut); code != 0 {
		t.Errorf("mandate graph --nats --format svg: exit %d: %s", code, errs)
	} else if b, err := os.ReadFile(svgOut); err != nil || !bytes.Contains(b, []byte("<svg")) || !bytes.Contains(b, []byte(`id="task&#45;t1"`)) {
		t.Errorf("the picture: %v: %.200s", err, b)
	}

	// Errors: an unknown run, an unreachable NATS, a state directory too.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"graph", "20200101T000000Z-000000", "--nats", url}, "no run or submission 20200101T000000Z-000000 in the fleet on " + url},
		{[]string{"graph", "--nats", closedURL(t)}, "connecting to NATS at nats://127.0.0.1:"},
		{[]string{"graph", "--nats", url, "--state-dir", state}, "--nats and --state-dir"},
	} {
		code, out, errs := mandate(tc.args...)
		if code != exitUsage || out != "" || !strings.Contains(errs, tc.want) || strings.Contains(errs, "panic") {
			t.Errorf("mandate %s: exit %d, stdout %q, stderr %q; want exit %d and %q", strings.Join(tc.args, " "), code, out, errs, exitUsage, tc.want)
		}
	}

	// The UI over the fleet: its handlers, read-only.
	t.Run("ui", func(t *testing.T) { uiOverFleet(t, url, last, first) })
}

// closedURL is a NATS URL where nothing listens.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "nats://" + addr
}

// uiOverFleet serves the UI's handlers over the fleet's runs (what
// "mandate ui --nats" serves) and reads the list, a run, its picture, an
// unknown run and the approvals (none: a fleet's UI has no state
// directory).
func uiOverFleet(t *testing.T, url string, last, first fleet.RunState) {
	ctx, cancel := context.WithTimeout(context.Background(), natstest.Timeout)
	defer cancel()
	nc, f, err := connectFleet(ctx, url, "test ui", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const addr, token = "127.0.0.1:4999", "test-token-0123456789abcdefghij"
	s, err := webui.New(webui.Options{Runs: newFleetRuns(f, url), Token: token, Addr: addr, Graph: uiGraph(testCache())})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	get := func(path string) (int, []byte) {
		t.Helper()
		r := httptest.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		r.AddCookie(&http.Cookie{Name: "mandate_ui_4999", Value: token})
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		return w.Code, w.Body.Bytes()
	}

	code, body := get("/api/runs")
	var list struct {
		Source string `json:"source"`
		Runs   []struct {
			ID, State, Principal, Grants, Node, Submission string
			Denials                                        int
		} `json:"runs"`
	}
	if err := json.Unmarshal(body, &list); code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/runs: %d %v: %s", code, err, body)
	}
	if list.Source != "the fleet on "+url || len(list.Runs) != 2 {
		t.Fatalf("GET /api/runs: %s", body)
	}
	for i, want := range []fleet.RunState{last, first} {
		r := list.Runs[i]
		if r.ID != want.RunID || r.Submission != want.ID || r.Node != "node-a" || r.Principal != "alice" || r.State != "done" ||
			r.Grants != "data: benefits (query, read)" {
			t.Errorf("run %d: %+v, want run %s of submission %s on node-a, its grants", i, r, want.RunID, want.ID)
		}
	}
	if list.Runs[0].Denials == 0 || list.Runs[1].Denials != 0 {
		t.Errorf("denials: %+v, want Bob's run's (the last) only", list.Runs)
	}

	code, body = get("/api/runs/" + first.RunID)
	var run struct {
		Run     struct{ ID string }
		Caps    []struct{ ID, Kind string }
		Outputs []struct{ Stream, Text string }
		Audit   struct{ Note string }
		Graph   bool
	}
	if err := json.Unmarshal(body, &run); code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/runs/%s: %d %v: %s", first.RunID, code, err, body)
	}
	if run.Run.ID != first.RunID || len(run.Caps) != 1 || run.Caps[0].Kind != "data" || !run.Graph ||
		len(run.Outputs) == 0 || !strings.Contains(run.Outputs[0].Text, "plan=Gold PPO") || !strings.Contains(run.Audit.Note, "mandate audit verify --nats") {
		t.Errorf("GET /api/runs/%s: %s", first.RunID, body)
	}
	if code, body := get("/api/runs/last"); code != http.StatusOK || !bytes.Contains(body, []byte(last.RunID)) {
		t.Errorf("GET /api/runs/last: %d %.300s", code, body)
	}
	if code, body := get("/api/runs/" + first.RunID + "/graph.svg"); code != http.StatusOK || !bytes.Contains(body, []byte("<svg")) {
		t.Errorf("GET the picture: %d %.300s", code, body)
	}
	if code, body := get("/api/runs/20200101T000000Z-000000"); code != http.StatusNotFound || !bytes.Contains(body, []byte("no run or submission")) {
		t.Errorf("GET an unknown run: %d %s", code, body)
	}
	if code, body := get("/api/approvals"); code != http.StatusOK || !bytes.Contains(body, []byte(`"pending":[]`)) {
		t.Errorf("GET /api/approvals: %d %s", code, body)
	}
	if code, _ := get("/runs/" + first.RunID); code != http.StatusOK {
		t.Errorf("GET the run's page: %d", code)
	}
}

// TestUINatsErrors: "mandate ui --nats" says what is wrong and serves
// nothing: NATS unreachable, a state directory given too.
func TestUINatsErrors(t *testing.T) {
	closed := closedURL(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ui", "--nats", closed}, "mandate ui: connecting to NATS at " + closed},
		{[]string{"ui", "--nats", closed, "--state-dir", t.TempDir()}, "--nats and --state-dir"},
		{[]string{"ui", "not a run", "--nats", closed}, "is not a run id"},
	} {
		code, out, errs := mandate(tc.args...)
		if code != exitUsage || out != "" || !strings.Contains(errs, tc.want) {
			t.Errorf("mandate %s: exit %d, stdout %q, stderr %q; want %q", strings.Join(tc.args, " "), code, out, errs, tc.want)
		}
	}
}

// TestFleetRecordWhyNone: a submission with no run yet says why it has no
// graph (no fleet is asked: its state says it all).
func TestFleetRecordWhyNone(t *testing.T) {
	fr := newFleetRuns(nil, "nats://u:secret@127.0.0.1:4222")
	if fr.Name() != "the fleet on nats://u:***@127.0.0.1:4222" {
		t.Errorf("name: %q", fr.Name())
	}
	for _, tc := range []struct {
		st   fleet.RunState
		want string
	}{
		{fleet.RunState{ID: "s1", State: fleet.StateQueued}, "submission s1 is queued: no node has taken it yet"},
		{fleet.RunState{ID: "s2", State: fleet.StateRunning, Node: "node-a"}, "submission s2 is starting on node node-a"},
		{fleet.RunState{ID: "s3", State: fleet.StateRefused, Error: "manifest: bad\nline"}, "submission s3 was refused before a run started: manifest: bad line"},
	} {
		_, err := fr.record(context.Background(), tc.st)
		if !errors.Is(err, webui.ErrNoRecord) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrNoRecord and %q", tc.st.State, err, tc.want)
		}
	}
}
