package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mandatevm/mandate/examples/tripplanner/sites"
	"github.com/mandatevm/mandate/fleet"
	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/internal/natsembed"
	"github.com/mandatevm/mandate/internal/natstest"
	"github.com/mandatevm/mandate/internal/testbin"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestFleetCluster: a three-server NATS cluster (streams and buckets with
// three replicas) and three "mandate node" processes, each its own NATS
// user with a node's permissions alone, run MANDATE_FLEET_RUNS (default
// 300) submissions: of the benefits desk (Alice's own record, and Alice
// asking for Bob's, refused) and, one in ten, of the trip planner with its
// finder child placed on another node, its calls forwarded to the owner
// (the story of every trip is the local one, one charge each). One NATS server is stopped a third of the
// way through and started again at two thirds. Every submission ends done
// with the right result, each run is recorded once, in its node's store,
// the nodes' copied audit logs verify, and a node's credentials cannot
// write another node's heartbeat or audit copy.
func TestFleetCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mandate, runs a NATS cluster and three nodes")
	}
	// 300 runs keep the package well inside go test's 10-minute default
	// on CI's busy 2-core machine (1,000 took 205 s alone here, and about
	// 480 s beside the other packages on CI); MANDATE_FLEET_RUNS=1000
	// measures throughput.
	runs := 300
	if v := os.Getenv("MANDATE_FLEET_RUNS"); v != "" {
		runs, _ = strconv.Atoi(v)
	}
	bin := testbin.Mandate(t)
	nodes := []string{"node-a", "node-b", "node-c"}
	users := []natsembed.User{natsembed.JetStreamUser("admin", "admin-secret", []string{">"}, []string{">"})}
	for _, n := range nodes {
		pub, sub := fleet.NodePermissions(n)
		users = append(users, natsembed.User{Name: n, Password: n + "-secret", Publish: pub, Subscribe: sub})
	}
	pub, sub := fleet.SubmitterPermissions("submitter")
	users = append(users, natsembed.User{Name: "submitter", Password: "submitter-secret", Publish: pub, Subscribe: sub})
	cl := natstest.StartCluster(t, 3, natstest.WithUsers(users...))
	withUser := func(user string) string {
		var out []string
		for _, u := range cl.URLs() {
			p, _ := url.Parse(u)
			p.User = url.UserPassword(user, user+"-secret")
			out = append(out, p.String())
		}
		return strings.Join(out, ",")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	f := connectFleet(t, withUser("admin"), 3)

	states := map[string]string{}
	for _, name := range nodes {
		state := t.TempDir()
		states[name] = state
		var logs kerneltest.Buffer
		cmd := exec.Command(bin, "node", "--nats", withUser(name), "--name", name, "--state-dir", state,
			"--cache-dir", testCache(), "--engine", testengine.Name(), "--heartbeat", "500ms", "--lost-after", "10s",
			"--parallel", "2", "--log-level", "warn")
		cmd.Stderr = &logs
		cmd.Env = append(os.Environ(), "TRIP_CARD_TOKEN="+sites.CardToken)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Signal(os.Interrupt)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(time.Minute):
				cmd.Process.Kill()
				<-done
			}
			if t.Failed() {
				t.Logf("%s's log:\n%s", name, &logs)
			}
		})
	}

	// A node's credentials write nothing of another node's.
	ncA, err := nats.Connect(withUser("node-a"), nats.CustomInboxPrefix(fleet.InboxPrefix("node-a")),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer ncA.Close()
	jsA, _ := jetstream.New(ncA)
	for _, subj := range []string{"mandate.audit.node-b.entry", "$KV." + fleet.BucketNodes + ".node-b", fleet.SubjectSubmit} {
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := jsA.Publish(pctx, subj, []byte(`{"forged":true}`))
		pcancel()
		if err == nil {
			t.Errorf("node-a's user published to %s", subj)
		}
	}

	// Nor speak for another node about a placed child: a call as if from
	// node-c to its owner node-b, an answer as if from owner node-b. The
	// admin listens; nothing arrives, and the server reports violations.
	ncAdmin, err := nats.Connect(withUser("admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer ncAdmin.Close()
	spied, err := ncAdmin.SubscribeSync("mandate.>")
	if err != nil {
		t.Fatal(err)
	}
	ncAdmin.Flush()
	var violations atomic.Int64
	ncSpoof, err := nats.Connect(withUser("node-a"), nats.CustomInboxPrefix(fleet.InboxPrefix("node-a")),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) || strings.Contains(err.Error(), "Permissions Violation") {
				violations.Add(1)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	for _, subj := range []string{"mandate.fwd.node-b.node-c.0123456789abcdef0123456789abcdef", "mandate.ret.node-c.node-b.0123456789abcdef0123456789abcdef"} {
		ncSpoof.Publish(subj, []byte("C\x01"))
	}
	ncSpoof.Flush()
	if m, err := spied.NextMsg(time.Second); err == nil {
		t.Errorf("node-a's user got %q through on %s", m.Data, m.Subject)
	}
	if n := violations.Load(); n != 2 {
		t.Errorf("%d permission violations reported to node-a's spoofing connection, want 2", n)
	}
	ncSpoof.Close()
	spied.Unsubscribe()

	s0, modules, err := fleet.Bundle(ctx, "../../examples/benefits/alice.hcl", nil, nil,
		func(ctx context.Context, dir string) ([]byte, error) {
			return host.BuildGuest(ctx, dir, false, testCache())
		})
	if err != nil {
		t.Fatal(err)
	}
	trip := sites.Start()
	defer trip.Close()
	tripManifest, err := sites.FleetManifest(ctx, "../../examples/tripplanner", t.TempDir(), func(ctx context.Context, dir string) ([]byte, error) {
		return host.BuildGuest(ctx, dir, false, testCache())
	})
	if err != nil {
		t.Fatal(err)
	}
	t0, tripModules, err := fleet.Bundle(ctx, tripManifest, trip.Vars(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	want := map[string]string{}
	trips := map[string]bool{}
	for i := 0; i < runs; i++ {
		s, mods := s0, modules
		s.ID = fmt.Sprintf("%032x", i+1)
		s.Input = nil
		want[s.ID] = "alice  plan=Gold PPO"
		switch {
		case i%10 == 5:
			s, mods = t0, tripModules
			s.ID = fmt.Sprintf("%032x", i+1)
			want[s.ID] = "booked F1"
			trips[s.ID] = true
		case i%2 == 1:
			s.Input = []byte("bob")
			want[s.ID] = "denied: read bob's benefits: cap_call: EDENIED"
		}
		if err := submitRetrying(ctx, f, s, mods); err != nil {
			t.Fatalf("submission %d: %v", i, err)
		}
		if i == runs/3 {
			cl.Stop(0)
			t.Logf("NATS server n0 stopped after %d submissions", i+1)
		}
		if i == 2*runs/3 {
			cl.Restart(0)
			t.Logf("NATS server n0 restarted after %d submissions", i+1)
		}
	}
	// Poll the states not yet final (a watcher's consumer may sit on the
	// server that was stopped; reads go to whichever server is up).
	// A hang is no run ending for 3 minutes, however long they all take.
	done := map[string]fleet.RunState{}
	stall := time.Now().Add(3 * time.Minute)
	for len(done) < runs {
		before := len(done)
		counts := map[string]int{}
		for id := range want {
			if _, ok := done[id]; ok {
				continue
			}
			gctx, gcancel := context.WithTimeout(ctx, 10*time.Second)
			st, _, err := f.State(gctx, id)
			gcancel()
			if err != nil {
				counts["unreadable"]++
				continue
			}
			if st.Final() {
				done[id] = st
			} else {
				counts[st.State]++
			}
		}
		if len(done) == runs {
			break
		}
		if len(done) > before {
			stall = time.Now().Add(3 * time.Minute)
		} else if time.Now().After(stall) {
			t.Fatalf("%d of %d runs ended, none in the last 3 minutes; the others: %v", len(done), runs, counts)
		}
		time.Sleep(500 * time.Millisecond)
	}
	elapsed := time.Since(start)
	t.Logf("%d runs on 3 nodes in %s: %.1f runs/s", runs, elapsed.Round(time.Millisecond), float64(runs)/elapsed.Seconds())

	var tripReports []string
	for id := range trips {
		tripReports = append(tripReports, string(done[id].Result))
	}
	if err := trip.Check(tripReports); err != nil {
		t.Errorf("the trips: %v", err)
	}
	t.Logf("%d trips, each with its finder on another node; %d charges", len(trips), len(trip.Pay.Charges()))

	perNode := map[string]map[string]bool{}
	for id, st := range done {
		if st.State != fleet.StateDone || st.Exit != 0 || !strings.Contains(string(st.Result), want[id]) {
			t.Errorf("%s: %+v", id, st)
			continue
		}
		if perNode[st.Node] == nil {
			perNode[st.Node] = map[string]bool{}
		}
		if perNode[st.Node][st.RunID] {
			t.Errorf("run %s of %s recorded twice", st.RunID, st.Node)
		}
		perNode[st.Node][st.RunID] = true
	}
	for _, name := range nodes {
		out, err := exec.Command(bin, "runs", "--state-dir", states[name], "--format", "json").Output()
		if err != nil {
			t.Fatalf("mandate runs (%s): %v", name, err)
		}
		var list []struct{ ID string }
		if err := json.Unmarshal(out, &list); err != nil {
			t.Fatal(err)
		}
		for _, r := range list {
			if !perNode[name][r.ID] {
				t.Errorf("%s recorded run %s, which no submission names", name, r.ID)
			}
		}
		if len(list) != len(perNode[name]) {
			t.Errorf("%s recorded %d runs, the fleet says %d", name, len(list), len(perNode[name]))
		}
		t.Logf("%s ran %d", name, len(list))
	}

	// What the fleet holds per run (for the sizing in docs/fleet.md).
	for _, name := range []string{fleet.StreamRuns, fleet.StreamAudit, "KV_" + fleet.BucketRuns, "OBJ_" + fleet.BucketModules} {
		st, err := f.JS.Stream(ctx, name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		t.Logf("%s: %d messages, %d bytes (%.0f bytes per run), %d replicas", name, info.State.Msgs, info.State.Bytes,
			float64(info.State.Bytes)/float64(runs), info.Config.Replicas)
	}

	// The fleet's records: every node's copied log verifies, read by a
	// user with a submitter's permissions alone (its own inbox prefix).
	out, err := exec.Command(bin, "audit", "verify", "--nats", withUser("submitter")).CombinedOutput()
	if err != nil || strings.Count(string(out), ": ok: ") < len(perNode) {
		t.Errorf("mandate audit verify --nats: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	out, err = exec.Command(bin, "runs", "--nats", withUser("submitter"), "--format", "json").Output()
	var listed []fleet.RunState
	if err != nil || json.Unmarshal(out, &listed) != nil || len(listed) < runs {
		t.Errorf("mandate runs --nats as the submitter: %v, %d listed\n%.500s", err, len(listed), out)
	}
}

// submitRetrying submits, retrying while the cluster elects new leaders
// (a stopped server): the message id makes a retried publish count once.
func submitRetrying(ctx context.Context, f *fleet.Fleet, s fleet.Submission, modules map[string][]byte) error {
	var err error
	for try := 0; try < 20; try++ {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = f.Submit(sctx, s, modules)
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return err
}
