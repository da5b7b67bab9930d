package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/natsembed"
	"github.com/mandatevm/mandate/internal/natstest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// refusals keeps the permission violations the server reported to one
// connection.
type refusals struct {
	mu   sync.Mutex
	seen []string
}

func (r *refusals) handle(_ *nats.Conn, _ *nats.Subscription, err error) {
	if errors.Is(err, nats.ErrPermissionViolation) {
		r.mu.Lock()
		r.seen = append(r.seen, err.Error())
		r.mu.Unlock()
	}
}

func (r *refusals) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

// waitFor waits up to d for a refusal, among those after the first from,
// of a subject starting with subject.
func (r *refusals) waitFor(from int, subject string, d time.Duration) bool {
	for deadline := time.Now().Add(d); ; {
		for _, s := range r.all()[from:] {
			if strings.Contains(s, `to "`+subject) {
				return true
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// permsServer starts a server whose users are an administrator ("admin",
// everything), a node's user for each of nodes (NodePermissions) and a
// submitter (SubmitterPermissions), each with the password name+"-secret",
// and returns it with the URL for a user.
func permsServer(t testing.TB, submitter string, nodes ...string) (*natsembed.Server, func(user string) string) {
	t.Helper()
	users := []natsembed.User{natsembed.JetStreamUser("admin", "admin-secret", []string{">"}, []string{">"})}
	for _, n := range nodes {
		pub, sub := NodePermissions(n)
		users = append(users, natsembed.User{Name: n, Password: n + "-secret", Publish: pub, Subscribe: sub})
	}
	pub, sub := SubmitterPermissions(submitter)
	users = append(users, natsembed.User{Name: submitter, Password: submitter + "-secret", Publish: pub, Subscribe: sub})
	srv := natstest.Start(t, natstest.WithUsers(users...))
	return srv, func(user string) string { return withUser(srv.ClientURL(), user) }
}

// withUser puts user's credentials in the nats:// URL u.
func withUser(u, user string) string {
	p, _ := url.Parse(u)
	p.User = url.UserPassword(user, user+"-secret")
	return p.String()
}

// connectAs connects to the fleet at u as name does (its inbox prefix),
// keeping the permission violations the server reports in r.
func connectAs(t testing.TB, u, name string, r *refusals) (*nats.Conn, *Fleet) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc, f, err := Connect(ctx, u, 1, nats.CustomInboxPrefix(InboxPrefix(name)), nats.ErrorHandler(r.handle))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(nc.Close)
	return nc, f
}

// noRefusals fails t if the server refused any of who's connections
// anything.
func noRefusals(t testing.TB, rs map[string]*refusals) {
	t.Helper()
	for who, r := range rs {
		if got := r.all(); len(got) != 0 {
			t.Errorf("%s's user was refused what it needs: %q", who, got)
		}
	}
}

// TestNodePermissions: two nodes and a submitter, each its own NATS user
// with NodePermissions or SubmitterPermissions, do all a fleet does: node-a
// creates the streams on an empty server, the nodes run the benefits desk's
// submissions, beat, reap a lost run, copy their audit logs (which verify,
// as the administrator and as the submitter reads them), and node-a places
// a child on node-b; the server refuses none of it. Then each call a node
// must not make is made with node-a's credentials and refused, and the
// fleet still works; the same calls with the JetStream API granted whole,
// as it was, succeed (TestNodePermissionsWide). Last, the hole perms.go
// names: node-a's user gets a submission run by pushing it into the work
// queue.
func TestNodePermissions(t *testing.T) {
	_, as := permsServer(t, "alice", "node-a", "node-b")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rs := map[string]*refusals{"node-a": {}, "node-b": {}, "alice": {}}

	// node-a is the server's first client: Ensure creates every stream.
	_, fA := connectAs(t, as("node-a"), "node-a", rs["node-a"])
	_, admin := connectAs(t, as("admin"), "admin", &refusals{})
	for _, s := range fleetStreams {
		if _, err := admin.JS.Stream(ctx, s); err != nil {
			t.Fatalf("stream %s after node-a's Ensure: %v", s, err)
		}
	}
	_, fB := connectAs(t, as("node-b"), "node-b", rs["node-b"])
	_, fSub := connectAs(t, as("alice"), "alice", rs["alice"])

	bundle := func(input string, receipt bool) (Submission, map[string][]byte) {
		t.Helper()
		s, modules, err := Bundle(ctx, "../examples/benefits/alice.hcl", nil, []byte(input), build)
		if err != nil {
			t.Fatal(err)
		}
		s.Receipt = receipt
		return s, modules
	}

	// A run claimed by a node that died before any other started: the
	// nodes' reapers mark it lost (no one else reaps: its state is polled).
	dead, modules := bundle("", false)
	if err := fSub.Submit(ctx, dead, modules); err != nil {
		t.Fatal(err)
	}
	st, rev, err := admin.State(ctx, dead.ID)
	if err != nil {
		t.Fatal(err)
	}
	st.State, st.Node, st.Started = StateRunning, "node-dead", time.Now()
	if ok, err := admin.swap(ctx, st, rev); err != nil || !ok {
		t.Fatalf("claim as node-dead: %v %v", ok, err)
	}

	nA := runNode(t, fA, "node-a", host.Options{}, shortLease)
	nB := runNode(t, fB, "node-b", host.Options{}, shortLease)
	for {
		st, _, err := admin.State(ctx, dead.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.Final() {
			if st.State != StateLost || !strings.Contains(st.Error, "not re-run") {
				t.Errorf("the dead node's run: %+v", st)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the dead node's run was never marked lost")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Runs, submitted and waited for by the submitter (whose Wait reaps
	// too), one with a receipt.
	const runs = 6
	var ids []string
	for i := range runs {
		input := ""
		if i%2 == 1 {
			input = "bob"
		}
		s, modules := bundle(input, i == 0)
		if err := fSub.Submit(ctx, s, modules); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	ran := map[string]string{}     // run id -> node
	denials := map[string]string{} // the runs the audit logs must name
	var receiptNode string
	for i, id := range ids {
		st, err := fSub.Wait(ctx, id, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		want := "alice  plan=Gold PPO"
		if i%2 == 1 {
			want = "denied: read bob's benefits: cap_call: EDENIED"
		}
		if st.State != StateDone || !strings.Contains(string(st.Result), want) {
			t.Errorf("submission %d: %+v, want done with %q", i, st, want)
		}
		if i == 0 {
			if len(st.Receipt) == 0 {
				t.Errorf("no receipt: %s", st.Error)
			}
			receiptNode = st.Node
		}
		ran[st.RunID] = st.Node
		if i%2 == 1 {
			denials[st.RunID] = st.Node
		}
	}
	all, err := fSub.AllStates(ctx)
	if err != nil || len(all) != runs+1 {
		t.Errorf("the submitter lists %d states (%v), want %d", len(all), err, runs+1)
	}

	// Heartbeats: each node's moves on, as the other node reads it.
	for _, r := range []struct {
		f    *Fleet
		node string
	}{{fB, "node-a"}, {fA, "node-b"}} {
		e1, err := r.f.Nodes.Get(ctx, r.node)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(600 * time.Millisecond)
		e2, err := r.f.Nodes.Get(ctx, r.node)
		if err != nil {
			t.Fatal(err)
		}
		if e2.Revision() <= e1.Revision() {
			t.Errorf("%s's heartbeat did not move: revision %d then %d", r.node, e1.Revision(), e2.Revision())
		}
	}

	// A child of node-a's placed on node-b: its module is read from the
	// object store by node-b's user, its calls answered by node-a's.
	rec := &timedAuditor{}
	k, task := placedTask(t, admin, nA, "node-b", "revoke-wait", rec)
	waitAllowed(t, rec, 20)
	for _, c := range k.Graph().Caps {
		if c.Holder == task.ID() && c.Name == "test" {
			if _, err := k.RevokeID(c.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := task.Wait(ctx); err != nil {
		t.Fatalf("placed task: %v\n%s", err, task.Stderr())
	}
	if got, _ := task.Result(); string(got) != "EREVOKED" || nB.placedChildren.Load() == 0 {
		t.Errorf("placed task: result %q, %d children on node-b; want EREVOKED, 1", got, nB.placedChildren.Load())
	}

	// The audit copies, as the nodes make them; checked by the
	// administrator and by the submitter.
	nA.copyAudit(ctx)
	nB.copyAudit(ctx)
	for who, js := range map[string]jetstream.JetStream{"admin": admin.JS, "alice": fSub.JS} {
		logs, err := VerifyAudit(ctx, js)
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		seen := map[string]bool{}
		for _, na := range logs {
			if na.Err != nil || na.Checkpoint > na.Entries {
				t.Errorf("%s verifying %s: %+v", who, na.Node, na)
			}
			for _, r := range na.Runs {
				if node, ok := ran[r]; ok && node != na.Node {
					t.Errorf("%s's log names run %s, which ran on %s", na.Node, r, node)
				}
				seen[r] = true
			}
		}
		for r, node := range denials {
			if !seen[r] {
				t.Errorf("%s: the denial of run %s (on %s) is in no copied log", who, r, node)
			}
		}
		if len(logs) != 2 {
			t.Errorf("%s: %d nodes' logs, want 2", who, len(logs))
		}
	}
	if _, err := fSub.NodeKey(ctx, receiptNode); err != nil {
		t.Errorf("the submitter reading %s's key: %v", receiptNode, err)
	}
	noRefusals(t, rs)
	t.Logf("%d runs (%d on node-a), a lost run reaped, a child placed on node-b, both audit copies verified: no refusal", len(ran), count(ran, "node-a"))

	// What a node must not do, with node-a's credentials on a connection
	// of its own.
	r := &refusals{}
	nc, err := nats.Connect(as("node-a"), nats.CustomInboxPrefix(InboxPrefix("node-a")), nats.ErrorHandler(r.handle))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for _, op := range forbidden() {
		got, err := op.try(ctx, nc, r)
		if got != refused {
			t.Errorf("%s: %s (%v), want refused (%s)", op.name, got, err, op.subject)
		} else {
			t.Logf("refused: %s (%s)", op.name, op.subject)
		}
	}

	// None of it happened: the streams and the consumer are as they were,
	// and the fleet still runs and verifies.
	for _, s := range fleetStreams {
		info, err := admin.JS.Stream(ctx, s)
		if err != nil {
			t.Fatalf("stream %s: %v", s, err)
		}
		if s == StreamAudit && (info.CachedInfo().Config.MaxMsgs != -1 || info.CachedInfo().State.Msgs == 0) {
			t.Errorf("%s changed: %+v", s, info.CachedInfo())
		}
	}
	if _, err := admin.JS.Consumer(ctx, StreamRuns, consumerName); err != nil {
		t.Errorf("consumer %s: %v", consumerName, err)
	}
	if _, err := admin.JS.Consumer(ctx, StreamRuns, "thief"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("consumer thief: %v, want not found", err)
	}
	if _, err := admin.JS.Stream(ctx, "EVIL"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("stream EVIL: %v, want not found", err)
	}
	s, modules := bundle("", false)
	if err := fSub.Submit(ctx, s, modules); err != nil {
		t.Fatal(err)
	}
	if st, err := fSub.Wait(ctx, s.ID, 3*time.Second); err != nil || st.State != StateDone {
		t.Errorf("a run after the refusals: %+v, %v", st, err)
	}
	nA.copyAudit(ctx)
	nB.copyAudit(ctx)
	if logs, err := VerifyAudit(ctx, admin.JS); err != nil || len(logs) != 2 || logs[0].Err != nil || logs[1].Err != nil {
		t.Errorf("the audit copies after the refusals: %+v, %v", logs, err)
	}
	noRefusals(t, rs)

	// What a subject cannot say (perms.go): a consumer's deliver subject
	// is in the request's body, so node-a's user, which may not publish a
	// submission, writes one as a run state's value and has a push
	// consumer put it in the work queue. It lands there under its own
	// subject, and the nodes' consumer, filtered on the submission
	// subject, never hands it out: the forged run stays queued.
	forged, _ := bundle("", false) // its module is stored already
	state, _ := json.Marshal(RunState{ID: forged.ID, State: StateQueued, Submitted: forged.Time})
	b, _ := json.Marshal(forged)
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(ctx, BucketRuns)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, forged.ID, state); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "forged", b); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreatePushConsumer(ctx, "KV_"+BucketRuns, jetstream.ConsumerConfig{
		Name: "push", FilterSubject: "$KV." + BucketRuns + ".forged", DeliverSubject: SubjectSubmit,
		AckPolicy: jetstream.AckNonePolicy, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
	}); err != nil {
		t.Fatalf("a push consumer on KV_%s: %v (perms.go says a node may make one: if that changed, say so there)", BucketRuns, err)
	}
	// The push is delivered (the stream holds one more message), and yet
	// no node takes it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := admin.Runs.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs > 0 || time.Now().After(deadline) {
			t.Logf("MANDATE_RUNS holds %d message(s) after the push", info.State.Msgs)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(5 * time.Second) // several fetches of both nodes
	if st, _, err := fSub.State(ctx, forged.ID); err != nil || st.State != StateQueued {
		t.Errorf("the submission node-a pushed into the work queue: %+v, %v; want it never taken", st, err)
	}
	noRefusals(t, rs)
}

func count(m map[string]string, v string) int {
	n := 0
	for _, x := range m {
		if x == v {
			n++
		}
	}
	return n
}

// forbiddenOp is a call a node's user must not make.
type forbiddenOp struct {
	name    string
	subject string // what the server refuses (a prefix)
	// api: a JetStream API call, which the whole API's grant ($JS.API.>)
	// allows; the others no grant of the API allows.
	api bool
	do  func(ctx context.Context, nc *nats.Conn, js jetstream.JetStream) error
}

// Outcomes of a forbidden call.
const (
	allowed = "allowed" // it went through
	refused = "refused" // the server refused its subject
	failed  = "failed"  // an error, but no refusal of its subject
)

// try makes the call and says what came of it.
func (op forbiddenOp) try(ctx context.Context, nc *nats.Conn, r *refusals) (string, error) {
	js, _ := jetstream.New(nc)
	from := len(r.all())
	// A refused request gets no answer: it ends with ctx; the refusal
	// itself comes at once.
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	err := op.do(ctx, nc, js)
	if err == nil && !op.api {
		err = nc.FlushWithContext(ctx)
	}
	wait := 2 * time.Second
	if op.api && err == nil {
		wait = 0 // answered: a refusal would have come first
	}
	switch {
	case r.waitFor(from, op.subject, wait):
		return refused, err
	case err != nil:
		return failed, err
	}
	return allowed, nil
}

// forbidden are the calls a node must not make, in an order that works
// when they are allowed: each one's target left for the next, and the
// nodes' consumer deleted before another is made (a work queue takes one
// consumer of each message).
func forbidden() []forbiddenOp {
	stream := func(ctx context.Context, js jetstream.JetStream, name string) (jetstream.Stream, error) {
		return js.Stream(ctx, name) // STREAM.INFO: granted
	}
	raw := func(subj string) func(context.Context, *nats.Conn, jetstream.JetStream) error {
		return func(_ context.Context, nc *nats.Conn, _ jetstream.JetStream) error {
			return nc.Publish(subj, []byte(`{"forged":true}`))
		}
	}
	sub := func(subj string) func(context.Context, *nats.Conn, jetstream.JetStream) error {
		return func(_ context.Context, nc *nats.Conn, _ jetstream.JetStream) error {
			_, err := nc.SubscribeSync(subj)
			return err
		}
	}
	return []forbiddenOp{
		{"create a stream of its own", jsAPI + "STREAM.CREATE.EVIL", true,
			func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream) error {
				_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EVIL", Subjects: []string{"evil.>"}})
				return err
			}},
		{"delete an audit entry", jsAPI + "STREAM.MSG.DELETE." + StreamAudit, true,
			func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream) error {
				s, err := stream(ctx, js, StreamAudit)
				if err != nil {
					return err
				}
				return s.DeleteMsg(ctx, 1)
			}},
		{"update a stream's configuration", jsAPI + "STREAM.UPDATE." + StreamAudit, true,
			func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream) error {
				s, err := stream(ctx, js, StreamAudit)
				if err != nil {
					return err
				}
				cfg := s.CachedInfo().Config
				cfg.MaxMsgs = 1
				_, err = js.UpdateStream(ctx, cfg)
				return err
			}},
		{"purge the audit stream", jsAPI + "STREAM.PURGE." + StreamAudit, true,
			func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream) error {
				s, err := stream(ctx, js, StreamAudit)
				if err != nil {
					return err
				}
				return s.Purge(ctx)
			}},
		{"purge the work queue", jsAPI + "STREAM.PURGE." + StreamRuns, true,
			func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream) error {
				s, err := stream(ctx, js, StreamRuns)
				if err != nil {
					return err
				}
				return s.Purge(ctx)
			}},
		{"delete the nodes' consumer", jsAPI + "CONSUMER.DELETE." + StreamRuns + "." + consumerName, true,
			func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream) error {
				return js.DeleteConsumer(ctx, StreamRuns, consumerName)
			}},
		{"create a consumer of its own on " + StreamRuns, jsAPI + "CONSUMER.CREATE." + StreamRuns + ".thief", true,
			func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream) error {
				_, err := js.CreateConsumer(ctx, StreamRuns, jetstream.ConsumerConfig{Durable: "thief", AckPolicy: jetstream.AckExplicitPolicy})
				return err
			}},
		{"delete the heartbeat bucket", jsAPI + "STREAM.DELETE.KV_" + BucketNodes, true,
			func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream) error {
				return js.DeleteKeyValue(ctx, BucketNodes)
			}},
		{"delete the audit stream", jsAPI + "STREAM.DELETE." + StreamAudit, true,
			func(ctx context.Context, _ *nats.Conn, js jetstream.JetStream) error {
				return js.DeleteStream(ctx, StreamAudit)
			}},
		{"write another node's heartbeat", "$KV." + BucketNodes + ".node-b", false, raw("$KV." + BucketNodes + ".node-b")},
		{"read another node's heartbeats as written", "$KV." + BucketNodes + ".node-b", false, sub("$KV." + BucketNodes + ".node-b")},
		{"copy entries into another node's audit log", subjectAudit + "node-b.entry", false, raw(subjectAudit + "node-b.entry")},
		{"publish a submission", SubjectSubmit, false, raw(SubjectSubmit)},
		{"store a module", "$O." + BucketModules + ".", false, raw("$O." + BucketModules + ".M.forged")},
		{"read another node's replies", InboxPrefix("node-b"), false, sub(InboxPrefix("node-b") + ".>")},
	}
}

// TestNodePermissionsWide: the calls TestNodePermissions finds refused go
// through when a node's user has the whole JetStream API, as it had
// ($JS.API.>, $JS.ACK.>, $JS.FC.>): so that test fails if the grant is
// widened back. Raw publishes and subscriptions stay refused.
func TestNodePermissionsWide(t *testing.T) {
	pub, sub := NodePermissions("node-a")
	wide := []string{"$JS.API.>", "$JS.ACK.>", "$JS.FC.>"}
	for _, p := range pub {
		if !strings.HasPrefix(p, "$JS.") {
			wide = append(wide, p)
		}
	}
	srv := natstest.Start(t, natstest.WithUsers(
		natsembed.JetStreamUser("admin", "admin-secret", []string{">"}, []string{">"}),
		natsembed.User{Name: "node-a", Password: "node-a-secret", Publish: wide, Subscribe: sub},
	))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, admin := connectAs(t, withUser(srv.ClientURL(), "admin"), "admin", &refusals{})
	if _, err := admin.JS.CreateOrUpdateConsumer(ctx, StreamRuns, jetstream.ConsumerConfig{Durable: consumerName, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.JS.Publish(ctx, subjectAudit+"node-a.key", []byte("k")); err != nil {
		t.Fatal(err)
	}
	r := &refusals{}
	nc, err := nats.Connect(withUser(srv.ClientURL(), "node-a"), nats.CustomInboxPrefix(InboxPrefix("node-a")), nats.ErrorHandler(r.handle))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for _, op := range forbidden() {
		want := refused
		if op.api {
			want = allowed
		}
		got, err := op.try(ctx, nc, r)
		if got != want {
			t.Errorf("%s with the whole API granted: %s (%v), want %s", op.name, got, err, want)
		} else {
			t.Logf("%s with $JS.API.>: %s", got, op.name)
		}
	}
}

// TestNodePermissionsRetry: the retry path (TestFleetRetry) with each node
// its own user: node-a, through a relay, takes a retryable run, keeps its
// message unacknowledged with progress notes and is cut off mid-run; the
// fleet queues the run again, node-b hands the redelivered message back
// while node-a's claim stands, then takes and finishes the second attempt;
// one charge in all, and no refusal.
func TestNodePermissionsRetry(t *testing.T) {
	pay, shop, gets := retryFixtures(t)
	srv, as := permsServer(t, "alice", "node-a", "node-b")
	rs := map[string]*refusals{"node-a": {}, "node-b": {}, "alice": {}}
	relay := natstest.StartRelay(t, strings.TrimPrefix(srv.ClientURL(), "nats://"))
	_, fA := connectAs(t, withUser(relay.URL(), "node-a"), "node-a", rs["node-a"])
	runNode(t, fA, "node-a", host.Options{}, shortLease)
	_, fSub := connectAs(t, as("alice"), "alice", rs["alice"])

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, modules, err := Bundle(ctx, "testdata/retry.hcl", map[string]string{"pay": pay.URL, "shop": shop.URL}, nil, build)
	if err != nil {
		t.Fatal(err)
	}
	if err := fSub.Submit(ctx, s, modules); err != nil {
		t.Fatal(err)
	}
	for gets.Load() == 0 {
		if ctx.Err() != nil {
			t.Fatal("the first attempt never fetched")
		}
		time.Sleep(20 * time.Millisecond)
	}
	relay.Cut()
	_, fB := connectAs(t, as("node-b"), "node-b", rs["node-b"])
	runNode(t, fB, "node-b", host.Options{}, shortLease)
	st, err := fSub.Wait(ctx, s.ID, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != StateDone || st.Node != "node-b" || st.Attempt != 2 || len(st.Lost) != 1 {
		t.Fatalf("%+v", st)
	}
	if n, r := len(pay.Charges()), pay.Replays(); n != 1 || r != 1 {
		t.Errorf("the provider made %d charges and %d replays, want 1 and 1", n, r)
	}
	noRefusals(t, rs)
	t.Logf("attempt %d on %s after %v; no refusal", st.Attempt, st.Node, st.Lost)
}
