//go:build unix

package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mandatevm/mandate/fleet"
	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/natsembed"
	"github.com/mandatevm/mandate/internal/testbin"
)

const (
	// clockSlack is what a request may arrive after its submission's lost
	// mark: the clock's granularity, nothing more (one machine, one clock).
	clockSlack = 5 * time.Millisecond
	// heldBound bounds the wait for every submission of a scenario to be
	// claimed and waiting on its held request.
	heldBound = 2 * time.Minute
	// finalBound bounds the wait for every submission of a scenario to end
	// after its fault ended, and stallBound the wait with no state moving.
	// A run that may be retried is handed to another node only when the
	// work queue delivers its message again (30 s after the lost node's
	// last progress note): about 40 s after a fault at worst.
	finalBound = 90 * time.Second
	stallBound = 40 * time.Second
)

// Scenario kinds.
const (
	scPause = "pause"     // a node SIGSTOPped past its lease, then SIGCONTinued
	scKill  = "kill"      // a node SIGKILLed and restarted within lost-after
	scStop  = "nats-stop" // a NATS server stopped (gracefully) and restarted
	scCrash = "nats-kill" // a NATS server's process killed and restarted
	scCut   = "cut"       // a node's link cut past lost-after; it fences itself
)

var scenarioKinds = []string{scPause, scKill, scStop, scCrash, scCut}

// Submission kinds: the net capability's methods, and retry.
const (
	kindGet   = "get"   // GET only, no retry
	kindPost  = "post"  // GET and POST, no retry
	kindRetry = "retry" // GET only, retry = 1
)

type env struct {
	t     *testing.T
	t0    time.Time
	seed  uint64
	rng   *rand.Rand
	bin   string
	lease time.Duration // the nodes' --lost-after
	cl    *cluster
	f     *fleet.Fleet
	fx    *fixture
	h     *history
	beats *beats
	clock *clockWatch
	nodes []*node
	bases map[string]fleet.Submission // by submission kind
	mods  map[string][]byte
	subs  []*submission
	scens []*scenario

	natsFaults map[string]int      // NATS scenarios so far, by kind
	reported   map[string]bool     // violations reported, by key
	byRule     map[string][]string // violations, by assertion
}

type scenario struct {
	round   int
	kind    string
	label   string
	victims []string // the nodes faulted
	server  string   // the NATS server stopped
	subs    []*submission
	mu      sync.Mutex
	events  []string
	faultAt time.Time
	end     time.Time
}

type submission struct {
	id, kind string
	script   []string
	sc       *scenario
	node     string        // the node that held it when the fault landed
	release  time.Duration // after the fault's start
}

// TestFleetFaults: see the package doc.
func TestFleetFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mandate, runs a NATS cluster and three nodes, and faults them")
	}
	seed := uint64(1)
	if v := os.Getenv("MANDATE_FAULTS_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("MANDATE_FAULTS_SEED=%q: %v", v, err)
		}
	}
	rounds := 1
	if v := os.Getenv("MANDATE_FAULTS_ROUNDS"); v != "" {
		var err error
		if rounds, err = strconv.Atoi(v); err != nil || rounds < 1 {
			t.Fatalf("MANDATE_FAULTS_ROUNDS=%q: want a positive number", v)
		}
	}
	t.Logf("seed %d, %d round(s) of %v; replay with MANDATE_FAULTS_SEED=%d MANDATE_FAULTS_ROUNDS=%d go test ./internal/faults -run TestFleetFaults -v",
		seed, rounds, scenarioKinds, seed, rounds)
	deadline := time.Now().Add(time.Duration(rounds) * 10 * time.Minute)
	if d, ok := t.Deadline(); ok {
		deadline = d.Add(-30 * time.Second)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()

	e := &env{t: t, t0: time.Now(), seed: seed, lease: lostAfter, rng: rand.New(rand.NewPCG(seed, 0x6d616e64617465)),
		reported: map[string]bool{}, byRule: map[string][]string{}, natsFaults: map[string]int{}}
	e.bin = testbin.Mandate(t)
	e.clock = watchClock(ctx)

	names := []string{"node-a", "node-b", "node-c"}
	users := []natsembed.User{natsembed.JetStreamUser("admin", "admin-secret", []string{">"}, []string{">"})}
	for _, n := range names {
		pub, sub := fleet.NodePermissions(n)
		users = append(users, natsembed.User{Name: n, Password: n + "-secret", Publish: pub, Subscribe: sub})
	}
	e.cl = startCluster(t, 3, users)
	e.fx = startFixture(t)
	var admin []string
	for _, u := range e.cl.URLs() {
		p, _ := url.Parse(u)
		p.User = url.UserPassword("admin", "admin-secret")
		admin = append(admin, p.String())
	}
	cctx, ccancel := context.WithTimeout(ctx, time.Minute)
	nc, f, err := fleet.Connect(cctx, strings.Join(admin, ","), 3)
	ccancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	e.f = f
	if e.h, err = watchStates(ctx, f); err != nil {
		t.Fatal(err)
	}
	if e.beats, err = watchBeats(ctx, f); err != nil {
		t.Fatal(err)
	}
	e.bundles(ctx)

	for _, name := range names {
		n := &node{name: name, state: t.TempDir()}
		e.nodes = append(e.nodes, n)
		e.start(n)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range e.nodes {
				t.Logf("%s's log:\n%s", n.name, tail(n.logs.String(), 400))
			}
			t.Logf("the NATS servers' warnings:\n%s", tail(e.cl.Logs(), 200))
		}
	})
	for _, n := range e.nodes {
		if _, err := e.waitBeat(ctx, n, 2*time.Minute); err != nil {
			t.Fatalf("%v\n%s", err, n.logs.String())
		}
	}
	t.Logf("%s: the cluster, the fixture and three nodes are up", e.at(time.Now()))

	for r := 1; r <= rounds; r++ {
		for _, i := range e.rng.Perm(len(scenarioKinds)) {
			if ctx.Err() != nil {
				t.Fatalf("out of time before round %d's %s", r, scenarioKinds[i])
			}
			e.scenario(ctx, r, scenarioKinds[i])
		}
		// The copies are append-only: a check after the round covers
		// every entry copied in it (fleet.VerifyAudit takes about 5 s
		// per node, too long to run after every scenario).
		if r < rounds {
			e.checkAudit(ctx, fmt.Sprintf("after round %d", r))
		}
	}

	// Last, with every node idle: the whole history again (an overwrite
	// may come after a scenario's checks), and the audit copies.
	e.waitIdle(ctx, time.Now(), 30*time.Second)
	e.check(ctx, nil, e.subs)
	e.checkAudit(ctx, "at the end")
	if p := e.h.problems(); p != "" {
		t.Logf("the state watch: %s", p)
	}
	var rules []string
	for r, where := range e.byRule {
		rules = append(rules, fmt.Sprintf("%s (%d: %s)", r, len(where), strings.Join(compact(where), ", ")))
	}
	sort.Strings(rules)
	if len(rules) > 0 {
		t.Logf("seed %d: assertions that failed:\n  %s", seed, strings.Join(rules, "\n  "))
	}
	t.Logf("seed %d: %d scenarios, %d submissions in %s", seed, len(e.scens), len(e.subs), time.Since(e.t0).Round(time.Millisecond))
}

// bundles builds the guest and bundles the three manifests.
func (e *env) bundles(ctx context.Context) {
	t := e.t
	dir := t.TempDir()
	wasm, err := host.BuildGuest(ctx, "testdata/fault-guest", false, testCache())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fault-guest.wasm"), wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	e.bases, e.mods = map[string]fleet.Submission{}, map[string][]byte{}
	for kind, extra := range map[string][2]string{
		kindGet:   {`["GET"]`, ""},
		kindPost:  {`["GET", "POST"]`, ""},
		kindRetry: {`["GET"]`, "  retry     = 1\n"},
	} {
		m := fmt.Sprintf(`task "faults" {
  module    = "fault-guest.wasm"
  principal = "alice"
%s  cap "net" "web" {
    origin        = var.origin
    methods       = %s
    paths         = ["/f"]
    allow_private = true
  }
}
`, extra[1], extra[0])
		path := filepath.Join(dir, kind+".hcl")
		if err := os.WriteFile(path, []byte(m), 0o644); err != nil {
			t.Fatal(err)
		}
		s, mods, err := fleet.Bundle(ctx, path, map[string]string{"origin": e.fx.URL()}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		e.bases[kind] = s
		for d, b := range mods {
			e.mods[d] = b
		}
	}
}

// scenario runs one scenario: submissions, the fault, the wait for their
// ends, the checks.
func (e *env) scenario(ctx context.Context, round int, kind string) {
	sc := &scenario{round: round, kind: kind}
	switch kind {
	case scPause, scKill, scCut:
		sc.victims = []string{e.nodes[e.rng.IntN(len(e.nodes))].name}
		sc.label = fmt.Sprintf("round %d %s %s", round, kind, sc.victims[0])
	default:
		sc.label = fmt.Sprintf("round %d %s", round, kind)
	}
	e.scens = append(e.scens, sc)
	e.note(sc, "begins")
	if kind == scStop || kind == scCrash {
		e.useLease(ctx, sc, natsLease)
	} else {
		e.useLease(ctx, sc, lostAfter)
	}

	// Six submissions fill the three nodes' run slots (two each, mandate
	// node's default --parallel), so every node, the victim included,
	// holds two runs when the fault lands.
	kinds := []string{kindGet, kindGet, kindPost, kindPost, kindRetry, kindRetry}
	e.rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	for i, k := range kinds {
		s := &submission{id: fmt.Sprintf("r%02d-%s-%d", round, kind, i), kind: k, sc: sc}
		s.script = e.script(s.id, k)
		sc.subs = append(sc.subs, s)
		e.subs = append(e.subs, s)
		sub := e.bases[k]
		sub.ID, sub.Input, sub.Time = s.id, []byte(strings.Join(s.script, "\n")), time.Now().UTC()
		if err := submitRetrying(ctx, e.f, sub, e.mods); err != nil {
			e.t.Fatalf("%s: submitting %s: %v", sc.label, s.id, err)
		}
	}
	e.note(sc, "submitted %d", len(sc.subs))
	e.waitHeld(ctx, sc)

	switch kind {
	case scPause:
		e.pause(ctx, sc)
	case scKill:
		e.kill(ctx, sc)
	case scStop, scCrash:
		e.stopServer(ctx, sc)
	case scCut:
		e.cutNode(ctx, sc)
	}
	e.waitFinal(ctx, sc)
	var gaps []string
	for _, n := range e.nodes {
		gap, at := e.beats.longestGap(n.name, sc.faultAt, time.Now())
		gaps = append(gaps, fmt.Sprintf("%s %s from %s", n.name, gap.Round(time.Millisecond), e.at(at)))
	}
	e.note(sc, "longest time between heartbeats since the fault: %s", strings.Join(gaps, ", "))
	for _, s := range sc.subs {
		e.fx.release(s.id) // a safety: each was released on its schedule
	}
	e.check(ctx, sc, sc.subs)
	e.supervise(ctx, sc)
	for _, n := range e.nodes {
		n.mu.Lock()
		select {
		case <-n.exited:
		default:
			n.expectExit, n.restartOnExit = false, false // the fault is over
		}
		n.mu.Unlock()
	}
	sc.end = time.Now()
	if steps := e.clockSteps(sc.faultAt, sc.end); steps != "" {
		e.note(sc, "the machine's wall clock moved away from its monotonic clock: %s", steps)
	}
	e.note(sc, "ends")
}

// script is a submission's requests: the first held by the fixture until
// its submission is released, then two more.
func (e *env) script(id, kind string) []string {
	p := func(step int) string { return fmt.Sprintf("/f/%s/%d", id, step) }
	if kind == kindPost {
		if e.rng.IntN(2) == 0 {
			return []string{"GET " + p(1) + "?hold=1", "POST " + p(2), "POST " + p(3)}
		}
		return []string{"POST " + p(1) + "?hold=1", "POST " + p(2), "GET " + p(3)}
	}
	return []string{"GET " + p(1) + "?hold=1", "GET " + p(2), "GET " + p(3)}
}

// waitHeld waits until every submission of sc waits on its held request,
// and notes which node holds each.
func (e *env) waitHeld(ctx context.Context, sc *scenario) {
	deadline := time.Now().Add(heldBound)
	for {
		e.supervise(ctx, sc)
		var waiting []string
		for _, s := range sc.subs {
			if !e.fx.holdingNow(s.id) {
				waiting = append(waiting, s.id)
			}
		}
		if len(waiting) == 0 {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			var b strings.Builder
			for _, id := range waiting {
				u, _ := e.h.latest(id)
				fmt.Fprintf(&b, "\n  %s: %s", id, e.fmtUpdate(u))
			}
			e.violate(sc.label, "every submission runs", sc.label+"/held",
				fmt.Sprintf("after %s, %d of %d submissions were not waiting on their first request (the fault lands all the same):%s",
					heldBound, len(waiting), len(sc.subs), b.String()))
			break
		}
		sleep(ctx, 50*time.Millisecond)
	}
	var on []string
	for _, s := range sc.subs {
		if u, ok := e.h.latest(s.id); ok && u.S.State == fleet.StateRunning {
			s.node = u.S.Node
		} else if st, _, err := e.f.State(ctx, s.id); err == nil && st.State == fleet.StateRunning {
			s.node = st.Node
		}
		on = append(on, s.id+"("+s.kind+")@"+s.node)
	}
	e.note(sc, "every submission waits on its held request: %s", strings.Join(on, " "))
}

// schedule releases each submission's held request at a seeded time
// after the fault began, the victim's between lo and hi, the others'
// between olo and ohi.
func (e *env) schedule(sc *scenario, lo, hi, olo, ohi time.Duration) {
	for _, s := range sc.subs {
		if slices.Contains(sc.victims, s.node) {
			s.release = e.between(lo, hi)
		} else {
			s.release = e.between(olo, ohi)
		}
		id := s.id
		time.AfterFunc(time.Until(sc.faultAt.Add(s.release)), func() { e.fx.release(id) })
	}
	var plan []string
	for _, s := range sc.subs {
		plan = append(plan, fmt.Sprintf("%s at %s", s.id, e.at(sc.faultAt.Add(s.release))))
	}
	e.note(sc, "held requests released: %s", strings.Join(plan, ", "))
}

// pause: the victim is SIGSTOPped for lost-after plus 3-5 s while its runs
// wait on their held requests, which the fixture answers while it is
// stopped; then SIGCONTinued. If it exits then (its lease lapsed), it is
// started again.
func (e *env) pause(ctx context.Context, sc *scenario) {
	v := e.node(sc.victims[0])
	d := lostAfter + e.between(3*time.Second, 5*time.Second)
	// Its lease lapsed while it was stopped: it may kill its runs and
	// exit when it continues (docs/fleet.md), or live on.
	v.mu.Lock()
	v.expectExit, v.restartOnExit = true, true
	v.mu.Unlock()
	if err := v.signal(syscall.SIGSTOP); err != nil {
		e.t.Fatal(err)
	}
	sc.faultAt = time.Now()
	e.note(sc, "%s stopped (SIGSTOP) for %s", v.name, d.Round(time.Millisecond))
	e.schedule(sc, 500*time.Millisecond, d-500*time.Millisecond, 300*time.Millisecond, d+2*time.Second)
	sleep(ctx, d)
	if err := v.signal(syscall.SIGCONT); err != nil {
		e.t.Fatal(err)
	}
	e.note(sc, "%s continued (SIGCONT), %s after it was stopped", v.name, time.Since(sc.faultAt).Round(time.Millisecond))
}

// kill: the victim is SIGKILLed while its runs wait, and started again
// (same name, same state directory) 0.2-1.5 s later, within lost-after.
func (e *env) kill(ctx context.Context, sc *scenario) {
	v := e.node(sc.victims[0])
	v.mu.Lock()
	v.expectExit = true
	v.mu.Unlock()
	_, exited := v.proc()
	if err := v.signal(syscall.SIGKILL); err != nil {
		e.t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		e.t.Fatalf("%s: %s did not die of SIGKILL within 30 s", sc.label, v.name)
	}
	sc.faultAt = time.Now()
	gap := e.between(200*time.Millisecond, 1500*time.Millisecond)
	e.note(sc, "%s killed (SIGKILL); restarting it in %s", v.name, gap.Round(time.Millisecond))
	e.schedule(sc, 300*time.Millisecond, 5*time.Second, 300*time.Millisecond, 5*time.Second)
	sleep(ctx, gap)
	e.start(v)
	e.note(sc, "%s started again (same name and state directory)", v.name)
	if h, err := e.waitBeat(ctx, v, time.Minute); err != nil {
		e.violate(sc.label, "every node survives", sc.label+"/restart", fmt.Sprintf("%s after its restart: %v", v.name, err))
	} else {
		e.note(sc, "%s's new process beat at %s, %s after the kill (lost-after %s)", v.name, e.at(h.Time),
			h.Time.Sub(sc.faultAt).Round(time.Millisecond), lostAfter)
	}
}

// stopServer: a NATS server is stopped (nats-stop: SIGTERM, natsembed's
// Shutdown) or killed (nats-kill: SIGKILL) for 1-8 s and started again;
// the first time, the leader of the heartbeat bucket's stream, later that
// one or another at random.
func (e *env) stopServer(ctx context.Context, sc *scenario) {
	leaders := map[string]string{}
	for _, s := range []string{"KV_" + fleet.BucketNodes, "KV_" + fleet.BucketRuns, fleet.StreamRuns} {
		leaders[s] = e.leader(ctx, s)
	}
	i := e.cl.Index(leaders["KV_"+fleet.BucketNodes])
	if i < 0 || (e.natsFaults[sc.kind] > 0 && e.rng.IntN(2) == 0) {
		i = e.rng.IntN(3)
	}
	e.natsFaults[sc.kind]++
	sc.server = e.cl.Name(i)
	down := e.between(time.Second, 8*time.Second)
	how := "stopping (SIGTERM)"
	if sc.kind == scCrash {
		how = "killing (SIGKILL)"
	}
	e.note(sc, "stream leaders %v; %s %s for %s", leaders, how, sc.server, down.Round(time.Millisecond))
	if sc.kind == scCrash {
		e.cl.Kill(i)
	} else {
		e.cl.Stop(i)
	}
	sc.faultAt = time.Now()
	e.note(sc, "%s is down", sc.server)
	e.schedule(sc, 0, 0, 300*time.Millisecond, down+4*time.Second)
	sleep(ctx, down)
	e.cl.Restart(i)
	e.note(sc, "%s started again and ready (%s after it stopped); stream leaders now: %s %s %s", sc.server,
		time.Since(sc.faultAt).Round(time.Millisecond), e.leader(ctx, "KV_"+fleet.BucketNodes),
		e.leader(ctx, "KV_"+fleet.BucketRuns), e.leader(ctx, fleet.StreamRuns))
}

// cutNode: the victim's relays are cut for lost-after plus 1-3 s; it must
// fence itself (kill its runs) and exit. It is started again with fresh
// relays afterwards.
func (e *env) cutNode(ctx context.Context, sc *scenario) {
	v := e.node(sc.victims[0])
	v.mu.Lock()
	v.expectExit = true
	v.mu.Unlock()
	_, exited := v.proc()
	d := lostAfter + e.between(time.Second, 3*time.Second)
	v.cut()
	sc.faultAt = time.Now()
	e.note(sc, "%s cut off from every server for at least %s", v.name, d.Round(time.Millisecond))
	e.schedule(sc, 300*time.Millisecond, lostAfter+3*time.Second, 300*time.Millisecond, lostAfter+3*time.Second)
	select {
	case <-exited:
		v.mu.Lock()
		err := v.exitErr
		v.mu.Unlock()
		e.note(sc, "%s exited %s after the cut: %v", v.name, time.Since(sc.faultAt).Round(time.Millisecond), err)
	case <-time.After(lostAfter + 30*time.Second):
		e.violate(sc.label, "a cut-off node kills its runs and exits", sc.label+"/fence",
			fmt.Sprintf("%s did not exit within %s of the cut (docs/fleet.md: it kills its runs and exits); killed", v.name, lostAfter+30*time.Second))
		v.signal(syscall.SIGKILL)
		<-exited
	}
	sleep(ctx, time.Until(sc.faultAt.Add(d)))
	e.start(v)
	e.note(sc, "%s started again with fresh relays", v.name)
	if _, err := e.waitBeat(ctx, v, time.Minute); err != nil {
		e.violate(sc.label, "every node survives", sc.label+"/restart", fmt.Sprintf("%s after its restart: %v", v.name, err))
	}
}

// waitFinal waits until every submission of sc is in a final state and
// the nodes run nothing, within finalBound of now and stallBound without
// any state moving; what is not final by then is reported by check.
func (e *env) waitFinal(ctx context.Context, sc *scenario) {
	start := time.Now()
	hard := start.Add(finalBound)
	moved := start
	revs := map[string]uint64{}
	lastGet := time.Time{}
	var allFinal time.Time
	for {
		e.supervise(ctx, sc)
		var pending []string
		for _, s := range sc.subs {
			u, ok := e.h.latest(s.id)
			if u.Rev != revs[s.id] {
				revs[s.id], moved = u.Rev, time.Now()
			}
			if !ok || !u.S.Final() {
				pending = append(pending, s.id)
			}
		}
		if time.Since(lastGet) > 2*time.Second {
			// The watch's consumer may sit on a stopped server a while.
			lastGet = time.Now()
			for _, id := range pending {
				gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				if st, rev, err := e.f.State(gctx, id); err == nil {
					e.h.add(id, update{Rev: rev, Via: "get", S: st})
				}
				cancel()
			}
		}
		if len(pending) == 0 {
			if allFinal.IsZero() {
				allFinal = time.Now()
				e.note(sc, "every submission is final")
			}
			if e.idle(ctx, allFinal) {
				return
			}
		}
		if now := time.Now(); now.After(hard) || now.Sub(moved) > stallBound || ctx.Err() != nil {
			if len(pending) > 0 {
				e.note(sc, "stopped waiting: %d submissions not final (%s after the fault ended, %s since a state moved)",
					len(pending), now.Sub(start).Round(time.Millisecond), now.Sub(moved).Round(time.Millisecond))
			} else {
				e.note(sc, "stopped waiting for the nodes to be idle: %s", e.running(ctx))
			}
			return
		}
		sleep(ctx, 250*time.Millisecond)
	}
}

// idle reports whether every live node's heartbeat, written after since,
// says it runs nothing.
func (e *env) idle(ctx context.Context, since time.Time) bool {
	for _, n := range e.nodes {
		if n.exitedNow() {
			continue
		}
		h, err := e.heartbeat(ctx, n.name)
		if err != nil || !h.Time.After(since) || h.Running != 0 {
			return false
		}
	}
	return true
}

// waitIdle waits, up to bound, until every node runs nothing.
func (e *env) waitIdle(ctx context.Context, since time.Time, bound time.Duration) {
	deadline := time.Now().Add(bound)
	for !e.idle(ctx, since) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			e.t.Logf("%s: the nodes are not idle after %s: %s", e.at(time.Now()), bound, e.running(ctx))
			return
		}
		sleep(ctx, 250*time.Millisecond)
	}
}

// running describes what the nodes' heartbeats say.
func (e *env) running(ctx context.Context) string {
	var out []string
	for _, n := range e.nodes {
		h, err := e.heartbeat(ctx, n.name)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", n.name, err))
			continue
		}
		out = append(out, fmt.Sprintf("%s: %d running (beat at %s, exited %v)", n.name, h.Running, e.at(h.Time), n.exitedNow()))
	}
	return strings.Join(out, "; ")
}

// supervise reports a node that exited unbidden (no scenario killed it
// or cut it off) and starts it again, so that the scenarios go on.
func (e *env) supervise(ctx context.Context, sc *scenario) {
	for _, n := range e.nodes {
		n.mu.Lock()
		select {
		case <-n.exited:
		default:
			n.mu.Unlock()
			continue
		}
		if n.expectExit && n.restartOnExit {
			err, at := n.exitErr, n.exitAt
			n.mu.Unlock()
			e.note(sc, "%s exited at %s (%v), as a node whose lease lapsed may; started again", n.name, e.at(at), err)
			e.start(n)
			continue
		}
		if n.expectExit || n.reported {
			n.mu.Unlock()
			continue
		}
		n.reported = true
		err, at := n.exitErr, n.exitAt
		n.mu.Unlock()
		if steps, ok := e.clockFenced(at); ok && strings.Contains(n.logs.String(), "the lease expired") {
			e.note(sc, "%s exited at %s, its lease expired, not a fault of the fleet: the machine's wall clock jumped ahead of its monotonic clock (%s) within its lease before; started again",
				n.name, e.at(at), steps)
			e.start(n)
			continue
		}
		e.violate(sc.label, "every node survives", fmt.Sprintf("%s/exit/%d", n.name, at.UnixNano()),
			fmt.Sprintf("%s exited at %s though this scenario did not fault it (%v); started again. Its log's end:\n%s",
				n.name, e.at(at), err, tail(n.logs.String(), 30)))
		e.start(n)
	}
}

func (e *env) node(name string) *node {
	for _, n := range e.nodes {
		if n.name == name {
			return n
		}
	}
	e.t.Fatalf("no node %s", name)
	return nil
}

// leader is the cluster's name of stream's leader ("" when unknown).
func (e *env) leader(ctx context.Context, stream string) string {
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := e.f.JS.Stream(ictx, stream)
	if err != nil {
		return "?"
	}
	info, err := st.Info(ictx)
	if err != nil || info.Cluster == nil {
		return "?"
	}
	return info.Cluster.Leader
}

// between is a seeded duration in [lo, hi].
func (e *env) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(e.rng.Int64N(int64(hi-lo)+1))
}

// at is t as an offset from the test's start.
func (e *env) at(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return fmt.Sprintf("+%.3fs", t.Sub(e.t0).Seconds())
}

// note adds to sc's timeline, and logs it.
func (e *env) note(sc *scenario, format string, args ...any) {
	line := e.at(time.Now()) + " " + fmt.Sprintf(format, args...)
	sc.mu.Lock()
	sc.events = append(sc.events, line)
	sc.mu.Unlock()
	e.t.Logf("%s: %s", sc.label, line)
}

// submitRetrying submits, retrying while the cluster elects new leaders:
// the message id makes a retried publish count once.
func submitRetrying(ctx context.Context, f *fleet.Fleet, s fleet.Submission, modules map[string][]byte) error {
	var err error
	for try := 0; try < 20; try++ {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = f.Submit(sctx, s, modules)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		sleep(ctx, 250*time.Millisecond)
	}
	return err
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("[%d lines before]", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// compact lists each distinct string once, with its count.
func compact(xs []string) []string {
	counts := map[string]int{}
	var order []string
	for _, x := range xs {
		if counts[x] == 0 {
			order = append(order, x)
		}
		counts[x]++
	}
	for i, x := range order {
		if counts[x] > 1 {
			order[i] = fmt.Sprintf("%s ×%d", x, counts[x])
		}
	}
	return order
}
