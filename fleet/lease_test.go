package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/caps/pay/paytest"
	"github.com/mandatevm/mandate/examples/tripplanner/sites"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/internal/natsembed"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/nats-io/nats.go/jetstream"
)

// TestLease: a lease is valid from a renewal until its duration has
// passed by the monotonic clock and by the wall clock (a machine that was
// suspended: its monotonic clock stood still); a renewal never shortens
// it.
func TestLease(t *testing.T) {
	l := newLease(time.Hour)
	if l.valid() == nil {
		t.Fatal("valid before any renewal")
	}
	l.renewed(time.Now())
	if err := l.valid(); err != nil {
		t.Fatal(err)
	}
	l.renewed(time.Now().Add(-2 * time.Hour)) // a late answer to an old beat
	if err := l.valid(); err != nil {
		t.Fatalf("an older renewal shortened the lease: %v", err)
	}
	// The wall clock says an hour went by (suspended): expired, whatever
	// the monotonic clock says.
	l.wall.Store(time.Now().UnixNano() - 1)
	err := l.valid()
	if err == nil || kindapi.ErrnoOf(err) != abi.EINTERNAL || !strings.Contains(err.Error(), "lease") {
		t.Fatalf("valid after the wall clock passed its end: %v", err)
	}
	short := newLease(time.Millisecond)
	short.renewed(time.Now())
	for short.valid() == nil {
		time.Sleep(time.Millisecond)
	}
}

// TestLivenessBySight: an observer judges a node by when it saw the
// node's heartbeat change, on its own clock: a stale read (an older
// revision) changes nothing, a node never seen is judged from when the
// observer started, an incarnation by its own last heartbeat, and the
// lease is the one the node published.
func TestLivenessBySight(t *testing.T) {
	l := &liveness{started: time.Now(), lease: time.Second, nodes: map[string]*seenBeat{}, incs: map[string]time.Time{}, ready: make(chan struct{})}
	if silent, _ := l.silent("never-seen", ""); silent {
		t.Error("a node never seen is silent at once")
	}
	l.started = time.Now().Add(-2 * time.Second) // past 1 s + the margin
	if silent, _ := l.silent("never-seen", ""); !silent {
		t.Error("a node never seen is not silent after the lease and margin")
	}
	l.observe("a", 5, Heartbeat{Node: "a", Incarnation: "i1", Lease: 10 * time.Second}, false)
	l.nodes["a"].at = time.Now().Add(-14 * time.Second) // inside 10 s + 5 s
	l.incs["a/i1"] = l.nodes["a"].at
	if silent, _ := l.silent("a", "i1"); silent {
		t.Error("judged by the observer's lease, not the node's")
	}
	l.observe("a", 3, Heartbeat{Node: "a", Incarnation: "i1", Lease: 10 * time.Second}, false) // stale
	l.nodes["a"].at = time.Now().Add(-16 * time.Second)
	l.incs["a/i1"] = l.nodes["a"].at
	if silent, _ := l.silent("a", "i1"); !silent {
		t.Error("not silent past its lease and margin")
	}
	// The node restarted: its new incarnation beats; the old one's runs
	// are judged by the old one's last heartbeat.
	l.observe("a", 6, Heartbeat{Node: "a", Incarnation: "i2", Lease: 10 * time.Second}, false)
	if silent, _ := l.silent("a", "i2"); silent {
		t.Error("the new incarnation is silent")
	}
	if silent, _ := l.silent("a", "i1"); !silent {
		t.Error("the old incarnation lives on through the new one's heartbeats")
	}
	if _, ok := l.live()["a"]; !ok {
		t.Error("a is not live")
	}
}

// TestDeadIsConfirmed: an observer declares a node dead only when a read
// from the bucket's leader shows nothing newer than what it saw; a read
// that fails proves nothing.
func TestDeadIsConfirmed(t *testing.T) {
	srv, f := startFleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := f.watchLiveness(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.waitReady(ctx); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	l.started = time.Now().Add(-time.Minute) // as if watching for a minute, seeing nothing
	l.mu.Unlock()
	if dead, why := l.dead(ctx, "ghost", ""); !dead || !strings.Contains(why, "no heartbeat for") {
		t.Errorf("a node with no heartbeat at all: dead %v (%s)", dead, why)
	}
	// b beats, but this observer's watch has not shown it (stopped): the
	// leader's answer has it, so b is not dead.
	b, _ := json.Marshal(Heartbeat{Node: "b", Time: time.Now(), Lease: time.Second})
	if _, err := f.Nodes.Put(ctx, "b", b); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	delete(l.nodes, "b")
	l.mu.Unlock()
	if dead, _ := l.dead(ctx, "b", ""); dead {
		t.Error("b, which just beat, declared dead")
	}
	// A read that cannot be made: not dead.
	other := connect(t, srv.ClientURL())
	lo := &liveness{f: other, started: time.Now().Add(-time.Minute), lease: time.Second, nodes: map[string]*seenBeat{}, incs: map[string]time.Time{}}
	other.JS.Conn().Close()
	if dead, _ := lo.dead(ctx, "b", ""); dead {
		t.Error("declared dead on a read that failed")
	}
}

// TestRestartedNodeEndsItsRuns: a node killed while it ran a run and
// restarted on its state directory ends that run at once (lost, "its
// process is gone"), rather than leaving it running for ever or waiting
// out a lease: the directory's lock proves the earlier process gone.
func TestRestartedNodeEndsItsRuns(t *testing.T) {
	_, f := startFleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	state := t.TempDir()
	if err := os.WriteFile(filepath.Join(state, "node.lock"), []byte("0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	id := newID()
	b, _ := json.Marshal(RunState{ID: id, State: StateRunning, Node: "node-a", Incarnation: "0123456789abcdef", Token: 1,
		RunID: "20261202T000000Z-000000", Attempt: 1, Started: time.Now()})
	if _, err := f.States.Create(ctx, id, b); err != nil {
		t.Fatal(err)
	}
	// Its lease is ten minutes: only the restart can end the run in time.
	n := runNode(t, f, "node-a", host.Options{StateDir: state}, func(n *Node) { n.LostAfter = 10 * time.Minute })
	st, err := f.Wait(ctx, id, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateLost || !strings.Contains(st.Error, "restarted (its process 0123456789abcdef is gone)") || st.Node != "node-a" {
		t.Errorf("%+v", st)
	}
	if n.Incarnation == "0123456789abcdef" {
		t.Error("the restarted node kept its old incarnation")
	}
	// A second process on the same state directory is refused.
	if _, _, err := nodeLock(state, "x"); err == nil {
		t.Error("a second node process took the state directory's lock")
	}
}

// TestPausedNodeActsNoMore: a node whose heartbeats stop (paused: a VM
// pause, a GC stall) while its run waits on a GET has the run declared
// lost; when the GET then returns, the run's next effect, a charge, is
// refused by the node's lease, and the provider sees nothing. The state
// stays lost, and says afterwards how the run ended there.
func TestPausedNodeActsNoMore(t *testing.T) {
	t.Setenv("FLEET_TEST_CARD", sites.CardToken)
	pay := paytest.NewProvider()
	t.Cleanup(pay.Close)
	pay.RequireInstrument(sites.CardToken)
	_, f := startFleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	paused := make(chan struct{})
	resume := make(chan struct{})
	var once sync.Once
	pause := func() { once.Do(func() { close(paused) }) }
	lostSeen := make(chan RunState, 1)
	shop := kerneltest.NewRecorder(func(w http.ResponseWriter, r *http.Request, _ kerneltest.Request) {
		pause() // the node stops beating while this GET waits
		select {
		case st := <-lostSeen:
			lostSeen <- st
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "shipped")
	})
	t.Cleanup(shop.Close)
	runNode(t, f, "node-a", host.Options{}, shortLease, func(n *Node) {
		n.beforeBeat = func() {
			select {
			case <-paused:
				<-resume
			default:
			}
		}
	})
	t.Cleanup(func() { close(resume) }) // before the node's cleanup waits for it
	s, modules, err := Bundle(ctx, "testdata/fetch-pay.hcl", map[string]string{"pay": pay.URL, "shop": shop.URL}, nil, build)
	if err != nil {
		t.Fatal(err)
	}
	id := s.ID
	if err := f.Submit(ctx, s, modules); err != nil {
		t.Fatal(err)
	}
	st, err := f.Wait(ctx, id, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateLost || st.Node != "node-a" {
		t.Fatalf("%+v", st)
	}
	lostSeen <- st // the GET returns: the node "wakes"
	for {
		cur, _, err := f.State(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if cur.After != "" {
			if cur.State != StateLost || !cur.Ended.Equal(st.Ended) || !strings.Contains(cur.After, "then ended on node-a") {
				t.Errorf("after the lost mark: %+v", cur)
			}
			t.Logf("lost: %s; after: %s", cur.Error, cur.After)
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("node-a never said how the run ended: %+v", cur)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := len(pay.Charges()); n != 0 {
		t.Errorf("the provider made %d charges after the lost mark", n)
	}
}

// TestWaitUsesNodeLease: a submitter judges a node by the lease the node
// published (here 4 s), not by its own default (0.5 s): the run is
// declared lost no earlier than 4 s and its margin after the heartbeat.
func TestWaitUsesNodeLease(t *testing.T) {
	_, f := startFleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, _ := json.Marshal(Heartbeat{Node: "slow", Time: time.Now(), Incarnation: "i1", Lease: 4 * time.Second})
	if _, err := f.Nodes.Put(ctx, "slow", b); err != nil {
		t.Fatal(err)
	}
	beat := time.Now()
	id := newID()
	b, _ = json.Marshal(RunState{ID: id, State: StateRunning, Node: "slow", Incarnation: "i1", Token: 1, Attempt: 1, Started: time.Now()})
	if _, err := f.States.Create(ctx, id, b); err != nil {
		t.Fatal(err)
	}
	st, err := f.Wait(ctx, id, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateLost {
		t.Fatalf("%+v", st)
	}
	if after := st.Ended.Sub(beat); after < 6*time.Second {
		t.Errorf("declared lost %v after the heartbeat, before its lease of 4 s and margin of 2 s", after)
	}
}

// TestStaleAttemptNotWritten: the node of a lost first attempt, which the
// fleet queued again and another node ran to the end, writes nothing over
// the second attempt's final state; over its own claim marked lost it
// writes only what it saw (After), the state staying lost.
func TestStaleAttemptNotWritten(t *testing.T) {
	_, f := startFleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	claim := func(id, node, inc string, retry int) (RunState, uint64) {
		t.Helper()
		st, rev, err := f.State(ctx, id)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			b, _ := json.Marshal(RunState{ID: id, State: StateQueued, Retry: retry})
			if rev, err = f.States.Create(ctx, id, b); err != nil {
				t.Fatal(err)
			}
			st = RunState{ID: id, State: StateQueued, Retry: retry}
		} else if err != nil {
			t.Fatal(err)
		}
		st.State, st.Node, st.Incarnation, st.Token, st.Attempt = StateRunning, node, inc, rev, st.Attempt+1
		if ok, err := f.swap(ctx, st, rev); err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		st, rev, _ = f.State(ctx, id)
		return st, rev
	}
	nodeA := &Node{Name: "node-a", Incarnation: "ia", Fleet: f, Logger: hclog.NewNullLogger(), LostAfter: time.Second}

	// Retried: attempt 1 on node-a is lost and queued again; node-b ends
	// attempt 2 done; node-a's late end is not written.
	id := newID()
	first, rev := claim(id, "node-a", "ia", 1)
	if ok, err := f.markLost(ctx, first, rev, "stopped answering"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	second, rev := claim(id, "node-b", "ib", 1)
	done := second
	done.State, done.Exit, done.Ended = StateDone, 0, time.Now()
	if ok, err := f.swap(ctx, done, rev); err != nil || !ok {
		t.Fatal(ok, err)
	}
	late := first
	late.State, late.Exit, late.Error, late.Ended = StateDone, 2, "failed late", time.Now()
	nodeA.finish(ctx, late, false)
	if cur, _, _ := f.State(ctx, id); cur.State != StateDone || cur.Node != "node-b" || cur.Exit != 0 || cur.After != "" {
		t.Errorf("the second attempt's end was written over: %+v", cur)
	}

	// Not retried: node-a's claim is marked lost; its end goes in After.
	id2 := newID()
	own, rev := claim(id2, "node-a", "ia", 0)
	if ok, err := f.markLost(ctx, own, rev, "stopped answering"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	lost, _, _ := f.State(ctx, id2)
	end := own
	end.State, end.Exit, end.Ended = StateDone, 0, time.Now()
	nodeA.finish(ctx, end, false)
	cur, _, _ := f.State(ctx, id2)
	if cur.State != StateLost || !cur.Ended.Equal(lost.Ended) || !strings.Contains(cur.After, "then ended on node-a") || !strings.Contains(cur.After, "done (exit 0)") {
		t.Errorf("%+v", cur)
	}
	// And never twice.
	nodeA.finish(ctx, end, false)
	if again, _, _ := f.State(ctx, id2); again.After != cur.After {
		t.Errorf("After written again: %q", again.After)
	}
}

// TestSubmitRefusedLeavesNoState: a submission the server refuses (larger
// than a message may be) leaves no queued state behind.
func TestSubmitRefusedLeavesNoState(t *testing.T) {
	_, f := startFleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := Submission{ID: newID(), Manifest: "x.hcl", Module: "sha256:00", Input: make([]byte, 2<<20), Time: time.Now()}
	err := f.Submit(ctx, s, nil)
	if err == nil {
		t.Fatal("a 2 MiB submission was published")
	}
	if _, _, serr := f.State(ctx, s.ID); !errors.Is(serr, jetstream.ErrKeyNotFound) {
		t.Errorf("after %v, the state is still there (%v)", err, serr)
	}
	if all, err := f.AllStates(ctx); err != nil || len(all) != 0 {
		t.Errorf("states %+v (%v), want none", all, err)
	}
}

// TestFencedRetryRunsAgain: a node whose lease expires kills its run of a
// retryable submission and queues it again; the submission's message goes
// back to the stream, so another node runs the next attempt. (The node
// used to acknowledge the message as the killed run ended: the run stayed
// queued, and was never run again.)
func TestFencedRetryRunsAgain(t *testing.T) {
	pay, shop, gets := retryFixtures(t)
	_, f := startFleet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) }) // before the node's cleanup waits for it
	var paused sync.Once
	runNode(t, f, "node-a", host.Options{}, shortLease, func(n *Node) {
		n.beforeBeat = func() {
			if gets.Load() == 0 {
				return
			}
			// The first GET waits: the heartbeats stop for longer than
			// the lease, and the next look at it finds it lapsed.
			paused.Do(func() {
				select {
				case <-stop:
				case <-time.After(n.LostAfter + time.Second):
				}
			})
		}
	})
	s, modules, err := Bundle(ctx, "testdata/retry.hcl", map[string]string{"pay": pay.URL, "shop": shop.URL}, nil, build)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Submit(ctx, s, modules); err != nil {
		t.Fatal(err)
	}
	for gets.Load() == 0 {
		if ctx.Err() != nil {
			t.Fatal("the first attempt never fetched")
		}
		time.Sleep(20 * time.Millisecond)
	}
	runNode(t, f, "node-b", host.Options{})
	st, err := f.Wait(ctx, s.ID, 3*time.Second)
	if err != nil {
		cur, _, _ := f.State(context.Background(), s.ID)
		t.Fatalf("%v; the state: %+v", err, cur)
	}
	if st.State != StateDone || st.Node != "node-b" || st.Attempt != 2 || len(st.Lost) != 1 || !strings.HasPrefix(st.Lost[0], "node-a ") {
		t.Fatalf("%+v", st)
	}
	if n, r := len(pay.Charges()), pay.Replays(); n != 1 || r != 1 {
		t.Errorf("the provider made %d charges and %d replays, want 1 and 1", n, r)
	}
	t.Logf("%s; lost: %v", st.Error, st.Lost)
}

// TestNodeWaitsForTheCluster: a node started while its NATS server is
// down (as during a cluster's election, when the buckets do not answer)
// waits and retries instead of exiting, and beats once the server is back.
// (Two restarted nodes used to exit with code 2 after 30 s.)
func TestNodeWaitsForTheCluster(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	store := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := natsembed.Start(ctx, natsembed.Config{StoreDir: store, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	f := connect(t, srv.ClientURL())
	srv.Shutdown() // the fleet's streams exist; now nothing answers

	waiting := make(chan struct{})
	var once sync.Once
	logs := hclog.New(&hclog.LoggerOptions{Name: "node-a", Level: hclog.Warn, Output: writerFunc(func(p []byte) (int, error) {
		if strings.Contains(string(p), "waiting for the fleet") {
			once.Do(func() { close(waiting) })
		}
		return os.Stderr.Write(p)
	})})
	h, err := host.Open(ctx, host.Options{StateDir: t.TempDir(), Engine: testengine.Name(), CacheDir: filepath.Dir(guestbuild.DefaultCacheDir())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	n := &Node{Name: "node-a", Fleet: f, Host: h, WorkDir: t.TempDir(), Heartbeat: 250 * time.Millisecond, LostAfter: 3 * time.Second, Logger: logs}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- n.Run(rctx) }()
	defer func() { stop(); <-done }()
	select {
	case <-waiting:
	case err := <-done:
		t.Fatalf("the node exited while the server was down: %v", err)
	case <-ctx.Done():
		t.Fatal("the node never said it was waiting for the fleet")
	}
	srv, err = natsembed.Start(ctx, natsembed.Config{StoreDir: store, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	back := time.Now()
	for {
		e, err := f.Nodes.Get(ctx, "node-a")
		if err == nil {
			var hb Heartbeat
			if json.Unmarshal(e.Value(), &hb) == nil && hb.Time.After(back) {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("the node exited: %v", err)
		case <-ctx.Done():
			t.Fatalf("no heartbeat of the node once the server was back: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }
