package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/natsembed"
	"github.com/mandatevm/mandate/internal/scaffold"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/nats-io/nats.go/jetstream"
)

// startFleet starts one NATS server and returns a connected fleet.
func startFleet(t testing.TB) (*natsembed.Server, *Fleet) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := natsembed.Start(ctx, natsembed.Config{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv, connect(t, srv.ClientURL())
}

func connect(t testing.TB, url string) *Fleet {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc, f, err := Connect(ctx, url, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return f
}

// testLostAfter is the lease of the nodes in a test that waits for a node
// to be declared lost (shortLease): short enough to wait out, long enough
// that a loaded machine does not lapse it between two heartbeats that get
// through. Other tests' nodes have the default lease, as nodes do: a test
// that loses no node must not fail because a busy machine delayed a beat.
const testLostAfter = 10 * time.Second

// shortLease gives a node the lease testLostAfter (runNode, startNode).
func shortLease(n *Node) { n.LostAfter = testLostAfter }

// startNode runs a node on its own host and state directory until the
// test ends; set adjusts the node before it runs.
func startNode(t testing.TB, f *Fleet, name string, set ...func(*Node)) *host.Host {
	t.Helper()
	state := t.TempDir()
	h, err := host.Open(context.Background(), host.Options{StateDir: state, Engine: testengine.Name(),
		CacheDir: filepath.Dir(guestbuild.DefaultCacheDir())})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{Name: name, Fleet: f, Host: h, WorkDir: t.TempDir(), Heartbeat: 250 * time.Millisecond, LostAfter: DefaultLease, Parallel: 2}
	for _, f := range set {
		f(n)
	}
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("node %s: %v", name, err)
		}
		h.Close()
	})
	return h
}

func build(ctx context.Context, dir string) ([]byte, error) {
	return host.BuildGuest(ctx, dir, false, filepath.Dir(guestbuild.DefaultCacheDir()))
}

// TestFleetRuns: submissions of the benefits desk, Alice's own record and
// Alice asking for Bob's, run on two nodes: each is run once, by one node,
// recorded in that node's run store, with the outcome a local run has.
func TestFleetRuns(t *testing.T) {
	_, f := startFleet(t)
	hosts := map[string]*host.Host{"node-a": startNode(t, f, "node-a"), "node-b": startNode(t, f, "node-b")}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const n = 12
	ids := make([]string, n)
	for i := range ids {
		input := []byte("")
		if i%2 == 1 {
			input = []byte("bob")
		}
		s, modules, err := Bundle(ctx, "../examples/benefits/alice.hcl", nil, input, build)
		if err != nil {
			t.Fatal(err)
		}
		if len(modules) != 1 || len(s.Files) != 2 {
			t.Fatalf("bundle: %d modules, files %v", len(modules), s.Files)
		}
		if err := f.Submit(ctx, s, modules); err != nil {
			t.Fatal(err)
		}
		ids[i] = s.ID
	}
	var wg sync.WaitGroup
	states := make([]RunState, n)
	errs := make([]error, n)
	for i, id := range ids {
		wg.Add(1)
		go func() { defer wg.Done(); states[i], errs[i] = f.Wait(ctx, id, 5*time.Second) }()
	}
	wg.Wait()
	runIDs := map[string]string{}
	for i, st := range states {
		if errs[i] != nil {
			t.Fatalf("waiting for %s: %v", ids[i], errs[i])
		}
		if st.State != StateDone || st.Exit != 0 {
			t.Errorf("submission %d: %+v", i, st)
			continue
		}
		want := "alice  plan=Gold PPO"
		if i%2 == 1 {
			want = "denied: read bob's benefits: cap_call: EDENIED"
		}
		if !strings.Contains(string(st.Result), want) {
			t.Errorf("submission %d on %s: result %q, want %q", i, st.Node, st.Result, want)
		}
		if prev, ok := runIDs[st.RunID]; ok {
			t.Errorf("run %s recorded for %s and %s", st.RunID, prev, ids[i])
		}
		runIDs[st.RunID] = st.Node
	}
	// Each run is in its node's store, once; the stores hold nothing else.
	total := 0
	for name, h := range hosts {
		list, err := h.Store().List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range list {
			if runIDs[r.ID] != name {
				t.Errorf("%s's store holds run %s, which the fleet says ran on %q", name, r.ID, runIDs[r.ID])
			}
		}
		total += len(list)
		t.Logf("%s ran %d", name, len(list))
	}
	if total != n {
		t.Errorf("%d runs recorded, want %d", total, n)
	}

	// The fleet's records: each node's copied log verifies, and every
	// denial (Alice asking for Bob's) is in the copy of its node's log.
	for name, h := range hosts {
		n := &Node{Name: name, Fleet: f, Host: h}
		n.defaults()
		if err := n.copier.copyNew(ctx); err != nil { // what the node copies as it stops, now
			t.Errorf("%s: copying its audit log: %v", name, err)
		}
	}
	logs, err := VerifyAudit(ctx, f.JS)
	if err != nil {
		t.Fatal(err)
	}
	inCopy := map[string]bool{}
	for _, na := range logs {
		if na.Err != nil || na.Checkpoint > na.Entries {
			t.Errorf("%s: %+v", na.Node, na)
		}
		for _, r := range na.Runs {
			if runIDs[r] != na.Node {
				t.Errorf("%s's log names run %s, which ran on %q", na.Node, r, runIDs[r])
			}
			inCopy[r] = true
		}
	}
	for i, st := range states {
		if i%2 == 1 && !inCopy[st.RunID] {
			t.Errorf("the denial of run %s (on %s) is in no copied log", st.RunID, st.Node)
		}
	}
}

// TestFleetModuleVerified: a module whose bytes in the object store do not
// match its digest is refused by the node: nothing runs.
func TestFleetModuleVerified(t *testing.T) {
	_, f := startFleet(t)
	startNode(t, f, "node-a")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, modules, err := Bundle(ctx, "../examples/benefits/alice.hcl", nil, nil, build)
	if err != nil {
		t.Fatal(err)
	}
	for d := range modules {
		modules[d] = []byte("\x00asm\x01\x00\x00\x00") // another module under that name
	}
	if err := f.Submit(ctx, s, modules); err != nil {
		t.Fatal(err)
	}
	st, err := f.Wait(ctx, s.ID, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateRefused || !strings.Contains(st.Error, "arrived with digest") || st.RunID != "" {
		t.Errorf("%+v", st)
	}
}

// submitAlice submits the benefits desk's alice.hcl.
func submitAlice(t *testing.T, ctx context.Context, f *Fleet) Submission {
	t.Helper()
	s, modules, err := Bundle(ctx, "../examples/benefits/alice.hcl", nil, nil, build)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Submit(ctx, s, modules); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFleetLostNode: a node that claimed a run and then stopped answering
// (no heartbeat, no acknowledgement) has the run marked lost, and the run
// is never started again: the node that receives the submission again
// finds it claimed and drops it.
func TestFleetLostNode(t *testing.T) {
	_, f := startFleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := submitAlice(t, ctx, f)
	// node-dead claims it, as a node does, and dies before acknowledging.
	st, rev, err := f.State(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	st.State, st.Node, st.Started = StateRunning, "node-dead", time.Now()
	if ok, err := f.swap(ctx, st, rev); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	h := startNode(t, f, "node-b", shortLease)
	final, err := f.Wait(ctx, s.ID, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if final.State != StateLost || final.Node != "node-dead" || !strings.Contains(final.Error, "not re-run") {
		t.Errorf("%+v", final)
	}
	// node-b got the submission again (it was never acknowledged) and ran
	// nothing: the work queue is empty and node-b's store too.
	deadline := time.Now().Add(time.Minute)
	for {
		info, err := f.Runs.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d submissions still queued", info.State.Msgs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	list, err := h.Store().List(ctx)
	if err != nil || len(list) != 0 {
		t.Errorf("node-b ran %d runs (%v), want none", len(list), err)
	}
}

// TestNoStateRecorded: a message in the work queue whose submission has
// no state (never published by Submit) is not run and not dropped
// silently: the node records it refused under its id, and the queue
// empties.
func TestNoStateRecorded(t *testing.T) {
	_, f := startFleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, _ := json.Marshal(Submission{ID: newID(), Manifest: "x.hcl", Module: "sha256:00"})
	var s Submission
	json.Unmarshal(b, &s)
	if _, err := f.JS.Publish(ctx, SubjectSubmit, b); err != nil {
		t.Fatal(err)
	}
	h := startNode(t, f, "node-a")
	final, err := f.Wait(ctx, s.ID, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if final.State != StateRefused || !strings.Contains(final.Error, "no submission state") {
		t.Errorf("%+v", final)
	}
	waitQueueEmpty(t, ctx, f)
	if list, err := h.Store().List(ctx); err != nil || len(list) != 0 {
		t.Errorf("node-a ran %d runs (%v), want none", len(list), err)
	}
}

// nakMsg is a delivered message that records how it was answered.
type nakMsg struct {
	jetstream.Msg
	got string
}

func (m *nakMsg) Nak() error                         { m.got = "nak"; return nil }
func (m *nakMsg) NakWithDelay(d time.Duration) error { m.got = "nak " + d.String(); return nil }
func (m *nakMsg) Term() error                        { m.got = "term"; return nil }

// TestStateNotFoundButThere: a node whose read missed a state that exists
// (a read answered from behind) does not drop the submission: its create
// of a refused state fails on the existing key, the state stays queued,
// and the message is handed back to be taken later.
func TestStateNotFoundButThere(t *testing.T) {
	_, f := startFleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := newID()
	b, _ := json.Marshal(RunState{ID: id, State: StateQueued})
	if _, err := f.States.Create(ctx, id, b); err != nil {
		t.Fatal(err)
	}
	n := &Node{Name: "node-a", Fleet: f, Logger: hclog.NewNullLogger()}
	m := &nakMsg{}
	n.stateNotFound(ctx, m, id)
	if m.got != "nak 200ms" {
		t.Errorf("the message was answered %q, want handed back", m.got)
	}
	if st, _, err := f.State(ctx, id); err != nil || st.State != StateQueued {
		t.Errorf("state %+v (%v), want queued", st, err)
	}
	// Without a state, it is recorded refused and terminated.
	other := newID()
	n.stateNotFound(ctx, m, other)
	if st, _, err := f.State(ctx, other); m.got != "term" || err != nil || st.State != StateRefused {
		t.Errorf("answered %q, state %+v (%v)", m.got, st, err)
	}
}

// waitQueueEmpty waits until the work queue holds nothing.
func waitQueueEmpty(t *testing.T, ctx context.Context, f *Fleet) {
	t.Helper()
	for {
		info, err := f.Runs.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 0 {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%d submissions still queued", info.State.Msgs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFleetScaffoldedTool: a tool written by mandate new (its manifest's
// module is ".", its own folder, outside this repository) runs on a node:
// the submitter builds it, the node runs the built module and the seeds
// travel with the submission.
func TestFleetScaffoldedTool(t *testing.T) {
	_, f := startFleet(t)
	startNode(t, f, "node-a")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "notes")
	if _, err := scaffold.New(scaffold.Options{Dir: dir, Lang: "go", Cap: "data"}); err != nil {
		t.Fatal(err)
	}
	s, modules, err := Bundle(ctx, filepath.Join(dir, "notes.hcl"), nil, nil, build)
	if err != nil {
		t.Fatal(err)
	}
	if s.Module == "" || len(modules) != 1 || len(s.Files) != 1 {
		t.Fatalf("bundle: module %q, %d modules, files %v", s.Module, len(modules), s.Files)
	}
	if err := f.Submit(ctx, s, modules); err != nil {
		t.Fatal(err)
	}
	st, err := f.Wait(ctx, s.ID, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateDone || !strings.Contains(string(st.Result), "allowed  read alice's note") ||
		!strings.Contains(string(st.Result), "denied   read bob's note: EDENIED") {
		t.Errorf("%+v\n%s", st, st.Result)
	}
}

// TestModuleMemory: the node keeps the modules it checked most recently,
// maxKeptModules of them, the least recently used dropped first.
func TestModuleMemory(t *testing.T) {
	var m moduleMemory
	for i := range maxKeptModules + 2 {
		m.put(fmt.Sprint(i), []byte{byte(i)})
		if i == 2 {
			m.get("0") // used again: kept over 1
		}
	}
	for d, want := range map[string]bool{"0": true, "1": false, "2": false, "3": true, fmt.Sprint(maxKeptModules + 1): true} {
		if _, ok := m.get(d); ok != want {
			t.Errorf("module %s kept: %v, want %v", d, ok, want)
		}
	}
	if len(m.bytes) != maxKeptModules || len(m.order) != maxKeptModules {
		t.Errorf("%d kept, %d in order; want %d", len(m.bytes), len(m.order), maxKeptModules)
	}
}
