package fleet

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/caps/pay/paytest"
	"github.com/mandatevm/mandate/examples/tripplanner/sites"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/internal/natstest"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox"
)

// runNode runs a node until the test ends and returns it once the fleet
// sees it alive; set adjusts the node before it runs.
func runNode(t testing.TB, f *Fleet, name string, opts host.Options, set ...func(*Node)) *Node {
	t.Helper()
	if opts.StateDir == "" {
		opts.StateDir = t.TempDir()
	}
	opts.Engine = testengine.Name()
	opts.CacheDir = filepath.Dir(guestbuild.DefaultCacheDir())
	h, err := host.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{Name: name, Fleet: f, Host: h, WorkDir: t.TempDir(), Heartbeat: 250 * time.Millisecond, LostAfter: DefaultLease, Parallel: 2,
		Logger: hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.Warn, Output: os.Stderr})}
	for _, f := range set {
		f(n)
	}
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		h.Close()
	})
	for i := 0; ; i++ {
		live, err := n.liveNodes(context.Background())
		if err == nil {
			if _, ok := live[name]; ok {
				return n
			}
		}
		if i > 1200 {
			t.Fatalf("node %s never beat", name)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitSees waits until n sees the nodes named alive: a watch delivers a
// heartbeat a moment after it is written.
func waitSees(t testing.TB, n *Node, names ...string) {
	t.Helper()
	for i := 0; ; i++ {
		live, err := n.liveNodes(context.Background())
		missing := ""
		for _, name := range names {
			if _, ok := live[name]; !ok {
				missing = name
			}
		}
		if err == nil && missing == "" {
			return
		}
		if i > 1200 {
			t.Fatalf("node %s never saw %s alive (%v)", n.Name, missing, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// timedAuditor keeps every audit event.
type timedAuditor struct {
	mu  sync.Mutex
	evs []kernel.AuditEvent
}

func (a *timedAuditor) Record(_ context.Context, ev kernel.AuditEvent) error {
	a.mu.Lock()
	a.evs = append(a.evs, ev)
	a.mu.Unlock()
	return nil
}

func (a *timedAuditor) events() []kernel.AuditEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]kernel.AuditEvent(nil), a.evs...)
}

// placedTask starts guest as a task of a kernel on owner whose every call
// is forwarded from the node named on (its module put in the fleet's
// object store, as a submission puts it), with the test kind granted.
func placedTask(t testing.TB, f *Fleet, owner *Node, on, guest string, rec kernel.Auditor) (*kernel.Kernel, *kernel.Task) {
	return startTask(t, f, owner, on, guest, rec, "", nil)
}

// startTask is placedTask with a reactor's entry and an input; on == ""
// runs the guest on the owner's kernel's own engine.
func startTask(t testing.TB, f *Fleet, owner *Node, on, guest string, rec kernel.Auditor, entry string, input []byte) (*kernel.Kernel, *kernel.Task) {
	t.Helper()
	ctx := context.Background()
	wasm, _, err := guestbuild.Build(ctx, filepath.Join("..", "testdata", "guests", guest), guestbuild.Options{Reactor: entry != ""})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Modules.PutBytes(ctx, sandbox.Digest(wasm), wasm); err != nil {
		t.Fatal(err)
	}
	eng := testengine.New(t)
	cfg := kernel.Config{Engine: eng, Kinds: []kindapi.Kind{kerneltest.New()}}
	if rec != nil {
		cfg.Auditor = rec
	}
	k, err := kernel.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := eng.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	placed := mod
	if on != "" {
		waitSees(t, owner, on)
		if placed, err = (&placer{n: owner, run: "test"}).Place(ctx, "node:"+on, mod, kernel.HostCallFuncs()); err != nil {
			t.Fatal(err)
		}
	}
	scope, err := k.Grant("test", kindapi.GrantContext{}, []byte(`{"level":5}`))
	if err != nil {
		t.Fatal(err)
	}
	task, err := k.Start(ctx, kernel.TaskSpec{Module: placed, Principal: "alice", Entry: entry, Input: input,
		Grants: []kernel.GrantSpec{{Name: "test", Kind: "test", Scope: scope, Audit: rec != nil}},
		Limits: kernel.Limits{Timeout: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	return k, task
}

// waitAllowed waits until the task has made n allowed calls.
func waitAllowed(t testing.TB, rec *timedAuditor, n int) {
	t.Helper()
	for i := 0; ; i++ {
		got := 0
		for _, ev := range rec.events() {
			if ev.Decision == kernel.Allow && ev.Op == "call:noop" {
				got++
			}
		}
		if got >= n {
			return
		}
		if i > 600 {
			t.Fatalf("%d allowed calls after 30 s, want %d", got, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPlacedRevoke: a task whose guest runs on another node uses its
// capability in a loop; the owner revokes it, and the very next call the
// guest makes is refused EREVOKED: no call is allowed after the revocation
// returned, because every call is decided by the owner's kernel.
func TestPlacedRevoke(t *testing.T) {
	_, f := startFleet(t)
	owner := runNode(t, f, "owner", host.Options{})
	runNode(t, f, "other", host.Options{})
	rec := &timedAuditor{}
	k, task := placedTask(t, f, owner, "other", "revoke-wait", rec)
	waitAllowed(t, rec, 20)

	var capID string
	for _, c := range k.Graph().Caps {
		if c.Holder == task.ID() && c.Name == "test" {
			capID = c.ID
		}
	}
	if capID == "" {
		t.Fatalf("no capability test in %+v", k.Graph().Caps)
	}
	// A call the owner was deciding while the revocation ran may still be
	// allowed: the claim is about the calls after it returned.
	if _, err := k.RevokeID(capID); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := task.Wait(ctx); err != nil {
		t.Fatalf("task: %v\n%s", err, task.Stderr())
	}
	if got, _ := task.Result(); string(got) != "EREVOKED" {
		t.Fatalf("result %q, want EREVOKED", got)
	}
	var refused time.Time
	for _, ev := range rec.events() {
		if ev.Op != "call:noop" {
			continue
		}
		if ev.Decision == kernel.Allow && !ev.Time.Before(revoked) {
			t.Errorf("a call allowed after the revocation: %+v", ev)
		}
		if ev.Decision == kernel.Deny && ev.Errno == abi.EREVOKED && refused.IsZero() {
			refused = ev.Time
		}
	}
	if refused.IsZero() {
		t.Fatal("no refusal audited")
	}
	t.Logf("revoked on the owner; the remote guest's next call refused %v later (it calls every ~1 ms)", refused.Sub(revoked))
}

// TestPlacedNodePartitioned: the node running a task's guest is cut off
// from NATS while the guest uses its capability in a loop. Its calls can no
// longer reach the owner: none is performed after the cut, the owner audits
// that the child's node was lost (EINTERNAL) and the task ends failed.
func TestPlacedNodePartitioned(t *testing.T) {
	srv, f := startFleet(t)
	owner := runNode(t, f, "owner", host.Options{}, shortLease)
	relay := natstest.StartRelay(t, strings.TrimPrefix(srv.ClientURL(), "nats://"))
	nc, cf, err := Connect(context.Background(), relay.URL(), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	runNode(t, cf, "cut", host.Options{}, shortLease)
	rec := &timedAuditor{}
	_, task := placedTask(t, f, owner, "cut", "revoke-wait", rec)
	waitAllowed(t, rec, 20)
	cut := time.Now()
	relay.Cut()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = task.Wait(ctx)
	if task.State() != kernel.TaskFailed {
		t.Fatalf("task ended %s (%v), want failed", task.State(), err)
	}
	ended := time.Now()
	var lost bool
	for _, ev := range rec.events() {
		// A call sent before the cut may still be answered as the cut
		// lands; anything allowed later than a beat after it is a hole.
		if ev.Decision == kernel.Allow && ev.Time.After(cut.Add(250*time.Millisecond)) {
			t.Errorf("a call allowed %v after the cut: %+v", ev.Time.Sub(cut), ev)
		}
		if ev.Op == "forward" && ev.Decision == kernel.Deny && ev.Errno == abi.EINTERNAL && strings.Contains(ev.Reason, "node cut") {
			lost = true
		}
	}
	if !lost {
		t.Errorf("the owner audited no lost node: %+v", rec.events())
	}
	t.Logf("cut at 0; the owner ended the task %v later (lost-after %v): %v", ended.Sub(cut), testLostAfter, err)
}

// TestPlacedTripChild: the trip planner on a fleet of two nodes, its
// finder child placed on the other node (placement = "fleet", and no
// approval asked: a node has no one to ask): the story is the local one (the 37-hour offer refused by the token, one charge,
// the passport at the airline only) and the finder ran on the other node.
func TestPlacedTripChild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the trip planner's guests")
	}
	s := sites.Start()
	t.Cleanup(s.Close)
	_, f := startFleet(t)
	t.Setenv("TRIP_CARD_TOKEN", sites.CardToken)
	nodes := []*Node{runNode(t, f, "node-a", host.Options{}), runNode(t, f, "node-b", host.Options{})}
	waitSees(t, nodes[0], "node-b")
	waitSees(t, nodes[1], "node-a")
	p, err := sites.FleetManifest(context.Background(), "../examples/tripplanner", t.TempDir(), build)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sub, modules, err := Bundle(ctx, p, s.Vars(), nil, build)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Submit(ctx, sub, modules); err != nil {
		t.Fatal(err)
	}
	st, err := f.Wait(ctx, sub.ID, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateDone || st.Exit != 0 {
		t.Fatalf("%+v", st)
	}
	if err := s.Check([]string{string(st.Result)}); err != nil {
		t.Error(err)
	}
	placed := 0
	for _, n := range nodes {
		if n.Name != st.Node {
			placed += int(n.placedChildren.Load())
		} else if n.placedChildren.Load() != 0 {
			t.Errorf("the owner %s ran a placed child itself", n.Name)
		}
	}
	if placed == 0 {
		t.Errorf("no child ran on the node other than the owner %s", st.Node)
	}
	t.Logf("owner %s; %d child(ren) ran on the other node", st.Node, placed)
}

// TestFleetRetry: a run whose manifest sets retry = 1 and whose every
// capability is repeatable (a charge keyed by the run, a GET) loses its
// node mid-run, after the charge, while its GET waits: the fleet queues it
// again, another node runs the second attempt, and the provider sees the
// same idempotency key again and replays the charge: one charge in all.
// The same manifest with a POST is refused before it runs.
func TestFleetRetry(t *testing.T) {
	pay, shop, gets := retryFixtures(t)
	srv, f := startFleet(t)
	relay := natstest.StartRelay(t, strings.TrimPrefix(srv.ClientURL(), "nats://"))
	nc, cf, err := Connect(context.Background(), relay.URL(), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	runNode(t, cf, "node-a", host.Options{}, shortLease)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	vars := map[string]string{"pay": pay.URL, "shop": shop.URL}
	s, modules, err := Bundle(ctx, "testdata/retry.hcl", vars, nil, build)
	if err != nil {
		t.Fatal(err)
	}
	if s.Retry != 1 {
		t.Fatalf("bundle retry %d", s.Retry)
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
	if n := len(pay.Charges()); n != 1 {
		t.Fatalf("%d charges before the cut, want 1", n)
	}
	relay.Cut() // node-a is lost mid-run
	runNode(t, f, "node-b", host.Options{}, shortLease)
	st, err := f.Wait(ctx, s.ID, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateDone || st.Node != "node-b" || st.Attempt != 2 || len(st.Lost) != 1 || !strings.HasPrefix(st.Lost[0], "node-a ") {
		t.Fatalf("%+v", st)
	}
	if !strings.Contains(string(st.Result), "status 200 shipped") {
		t.Errorf("result %q", st.Result)
	}
	if n, r := len(pay.Charges()), pay.Replays(); n != 1 || r != 1 {
		t.Errorf("the provider made %d charges and %d replays, want 1 and 1", n, r)
	}
	t.Logf("%s; lost: %v; %s", st.Error, st.Lost, st.Result)

	// Not repeatable: the node refuses it, nothing runs.
	s2, modules, err := Bundle(ctx, "testdata/retry.hcl", vars, nil, build)
	if err != nil {
		t.Fatal(err)
	}
	s2.Source = []byte(strings.Replace(string(s2.Source), `methods       = ["GET"]`, `methods       = ["GET", "POST"]`, 1))
	if err := f.Submit(ctx, s2, modules); err != nil {
		t.Fatal(err)
	}
	st, err = f.Wait(ctx, s2.ID, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateRefused || !strings.Contains(st.Error, `capability "shop" (net) is not repeatable: it allows POST`) {
		t.Errorf("%+v", st)
	}
	if n := len(pay.Charges()); n != 1 {
		t.Errorf("%d charges after the refused run", n)
	}
}

// retryFixtures sets ackWait short for the test and starts what a retried
// pay-fetch run (testdata/retry.hcl) talks to: a payment provider, and a
// shop whose first GET waits until the test ends (the first attempt's
// node is cut off while it waits) and whose later ones answer "shipped".
// gets counts the shop's requests.
func retryFixtures(t *testing.T) (pay *paytest.Provider, shop *kerneltest.Recorder, gets *atomic.Int64) {
	t.Helper()
	w := ackWait
	t.Cleanup(func() { ackWait = w })
	ackWait = 3 * time.Second
	t.Setenv("FLEET_TEST_CARD", sites.CardToken)
	pay = paytest.NewProvider()
	t.Cleanup(pay.Close)
	pay.RequireInstrument(sites.CardToken)
	release := make(chan struct{})
	gets = new(atomic.Int64)
	shop = kerneltest.NewRecorder(func(w http.ResponseWriter, r *http.Request, _ kerneltest.Request) {
		if gets.Add(1) == 1 {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		fmt.Fprint(w, "shipped")
	})
	t.Cleanup(shop.Close)
	t.Cleanup(func() { close(release) })
	return pay, shop, gets
}

// TestValidNonce: a placement's nonce is spliced into subjects; only what
// newNonce draws is accepted, never a wildcard or a separator.
func TestValidNonce(t *testing.T) {
	if n := newNonce(); !validNonce(n) {
		t.Errorf("newNonce %q refused", n)
	}
	for _, bad := range []string{"", strings.Repeat("a", 31), strings.Repeat(">", 32), strings.Repeat("*", 32),
		"0123456789abcdef0123456789abcde.", "0123456789ABCDEF0123456789ABCDEF", strings.Repeat("a", 33)} {
		if validNonce(bad) {
			t.Errorf("nonce %q accepted", bad)
		}
	}
}
