package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/manifest"
	"github.com/mandatevm/mandate/sandbox"
	"github.com/nats-io/nats.go/jetstream"
)

// ackWait is how long a delivered submission may go unacknowledged before
// the stream delivers it again.
var ackWait = 30 * time.Second

// Node takes submissions from the fleet and runs them on its host.
type Node struct {
	// Name identifies the node in heartbeats and run states; a valid KV
	// key ([A-Za-z0-9_=.-]).
	Name  string
	Fleet *Fleet
	// Host runs the tasks and records them in the node's own state
	// directory (its run store and audit log).
	Host *host.Host
	// WorkDir is where a submission's folder is recreated (removed when
	// the run ends).
	WorkDir string
	Logger  hclog.Logger
	// Heartbeat is how often the node says it is alive (default 1s);
	// LostAfter is its lease: how long each heartbeat that gets through
	// lets it act for its runs (default DefaultLease, 30 s, or 5
	// heartbeats if longer; it must outlast a NATS cluster's leader
	// election). Others declare its runs lost LostAfter plus
	// Margin(LostAfter) after its last heartbeat.
	Heartbeat, LostAfter time.Duration
	// Parallel bounds the runs at once (default 2).
	Parallel int
	// Children bounds the guests of children other nodes place here,
	// running at once (default 4; see place.go).
	Children int

	// Incarnation names this process of the node in heartbeats and
	// claims (drawn by Run).
	Incarnation string

	lease   *lease
	reaper  *reaper
	live    atomic.Pointer[liveness]
	running atomic.Int64
	// placedChildren counts the children of other nodes' runs run here.
	placedChildren atomic.Int64
	fenced         atomic.Bool // no heartbeat got through for LostAfter
	// fencedC is closed as the node fences itself.
	fencedC chan struct{}
	// beforeBeat, in tests, is called before each heartbeat: a test
	// blocks it to pause the node's heartbeats while its runs go on.
	beforeBeat func()
	mu         sync.Mutex
	cancels    map[string]context.CancelFunc

	auditMu  sync.Mutex
	copier   *auditCopier
	mods     moduleMemory
	fetchMu  sync.Mutex
	fetching map[string]*sync.Mutex // by digest, one lock per module ever fetched
}

func (n *Node) defaults() {
	if n.Heartbeat <= 0 {
		n.Heartbeat = time.Second
	}
	if n.LostAfter <= 0 {
		n.LostAfter = max(DefaultLease, 5*n.Heartbeat)
	}
	if n.Parallel <= 0 {
		n.Parallel = 2
	}
	if n.Children <= 0 {
		n.Children = 4
	}
	if n.Logger == nil {
		n.Logger = hclog.NewNullLogger()
	}
	n.cancels = map[string]context.CancelFunc{}
	n.fencedC = make(chan struct{})
	n.Incarnation = newID()[:16]
	n.lease = newLease(n.LostAfter)
	n.copier = &auditCopier{node: n.Name, log: n.Host.Log(), js: n.Fleet.JS, s: n.Fleet.Audit, next: -1}
}

// copyAudit copies the node's new audit entries and a checkpoint to the
// fleet's stream; a failure is logged and retried with the next run.
func (n *Node) copyAudit(ctx context.Context) {
	if n.fenced.Load() || !n.Fleet.JS.Conn().IsConnected() {
		return // cut off: the copy waits for the next start
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	n.auditMu.Lock()
	defer n.auditMu.Unlock()
	if err := n.copier.copyNew(ctx); err != nil {
		n.copier.next = -1 // read the stream again next time
		n.Logger.Warn("copying the audit log to the fleet", "error", err)
	}
}

// Run takes and runs submissions until ctx ends, then waits for the runs
// it started (they are killed by ctx's end). It returns an error when
// the node fenced itself (its lease expired: its runs were killed).
func (n *Node) Run(ctx context.Context) error {
	n.defaults()
	prev, unlock, err := nodeLock(n.Host.Options().StateDir, n.Incarnation)
	if err != nil {
		return fmt.Errorf("fleet: node %s: %w", n.Name, err)
	}
	defer unlock()
	// The first heartbeat, the watches and the work queue's consumer wait
	// for the cluster (a node started while it elects a leader waits for
	// the bucket rather than exiting), as long as ctx allows.
	if err := n.retry(ctx, "the first heartbeat", func(ctx context.Context) error {
		sent := time.Now()
		if err := n.beat(ctx); err != nil {
			return err
		}
		n.lease.renewed(sent)
		return nil
	}); err != nil {
		return err
	}
	wctx, stopWatches := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWatches()
	if err := n.retry(ctx, "watching the fleet's heartbeats and runs", func(context.Context) error {
		live, err := n.Fleet.watchLiveness(wctx, n.LostAfter)
		if err != nil {
			return err
		}
		r, err := n.Fleet.watchClaims(wctx, live)
		if err != nil {
			return err
		}
		r.self, r.inc, r.prev = n.Name, n.Incarnation, prev
		n.live.Store(live)
		n.reaper = r
		return nil
	}); err != nil {
		return err
	}
	n.copyAudit(ctx)
	var cons jetstream.Consumer
	if err := n.retry(ctx, "the work queue's consumer", func(ctx context.Context) (err error) {
		cons, err = n.Fleet.JS.CreateOrUpdateConsumer(ctx, StreamRuns, jetstream.ConsumerConfig{
			Durable: consumerName, AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait,
			// Only what was published as a submission: a message pushed into
			// the stream under another subject (perms.go) is never delivered.
			FilterSubject: SubjectSubmit,
		})
		return err
	}); err != nil {
		return err
	}
	stopChildren, err := n.serveChildren(ctx)
	if err != nil {
		return fmt.Errorf("fleet: node %s: serving placed children: %w", n.Name, err)
	}
	var wg sync.WaitGroup
	defer n.copyAudit(context.WithoutCancel(ctx)) // after the runs end
	defer stopChildren()
	defer wg.Wait()
	wg.Add(1)
	go func() { defer wg.Done(); n.heartbeats(ctx) }()
	slots := make(chan struct{}, n.Parallel)
	for ctx.Err() == nil {
		select {
		case <-n.fencedC:
			return fmt.Errorf("fleet: node %s: its lease expired (no heartbeat got through for %s): its runs were killed and it takes no more", n.Name, n.LostAfter)
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			<-slots
			if ctx.Err() != nil {
				return nil
			}
			n.Logger.Warn("fetching submissions", "error", err)
			time.Sleep(n.Heartbeat)
			continue
		}
		got := false
		for msg := range batch.Messages() {
			got = true
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				n.take(ctx, msg)
			}()
		}
		if !got {
			<-slots
		}
	}
	return nil
}

// retry runs step until it succeeds or ctx ends, waiting 250 ms doubling
// to 5 s between tries and logging each failure.
func (n *Node) retry(ctx context.Context, what string, step func(context.Context) error) error {
	wait := 250 * time.Millisecond
	for {
		sctx, cancel := context.WithTimeout(ctx, opTimeout)
		err := step(sctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("fleet: node %s: %s: %w", n.Name, what, err)
		}
		n.Logger.Warn("waiting for the fleet", "step", what, "error", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("fleet: node %s: %s: %w", n.Name, what, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// beat writes the node's heartbeat.
func (n *Node) beat(ctx context.Context) error {
	b, _ := json.Marshal(Heartbeat{Node: n.Name, Time: time.Now(), Running: int(n.running.Load()),
		Incarnation: n.Incarnation, Lease: n.LostAfter})
	_, err := n.Fleet.Nodes.Put(ctx, n.Name, b)
	return err
}

// fence is the runs' kernel.Config.Fence: nil while the node's lease is
// valid.
func (n *Node) fence() error {
	if n.fenced.Load() {
		return errFenced
	}
	return n.lease.valid()
}

var errFenced = errors.New("this node fenced itself: its lease on its runs expired, and it performs nothing more for them")

// heartbeats beats every Heartbeat, each heartbeat that gets through
// renewing the lease from when it was sent. The moment the lease lapses
// (checked every Heartbeat and before each beat: a node that was paused
// notices as it wakes), it kills this node's runs, which the fleet will
// call lost, and closes fencedC. Reaping the runs of dead nodes runs
// beside it, so a slow reap never delays a beat.
func (n *Node) heartbeats(ctx context.Context) {
	go n.reap(ctx)
	t := time.NewTicker(n.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n.beforeBeat != nil {
			n.beforeBeat()
		}
		if err := n.lease.valid(); err != nil {
			n.fenceSelf(err)
			return
		}
		// A beat may wait a third of the lease for its answer (a slow
		// server is not a dead node), no more: one lost in a server that
		// died must not use up the lease the next one could renew.
		sent := time.Now()
		bctx, cancel := context.WithTimeout(ctx, max(n.LostAfter/3, time.Second))
		err := n.beat(bctx)
		cancel()
		if err == nil {
			n.lease.renewed(sent)
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if err := n.lease.valid(); err != nil {
			n.fenceSelf(err)
			return
		}
	}
}

// fenceSelf kills this node's runs once its lease has expired.
func (n *Node) fenceSelf(why error) {
	n.Logger.Error("the lease expired (no heartbeat got through): killing this node's runs", "node", n.Name, "lease", n.LostAfter, "why", why)
	n.fenced.Store(true)
	n.mu.Lock()
	for _, c := range n.cancels {
		c()
	}
	n.mu.Unlock()
	close(n.fencedC)
}

// reap marks lost the runs of dead nodes, and at once those of this
// node's previous process.
func (n *Node) reap(ctx context.Context) {
	select {
	case <-n.reaper.ready:
	case <-ctx.Done():
		return
	}
	t := time.NewTicker(n.Heartbeat)
	defer t.Stop()
	for {
		if k := n.reaper.pass(ctx); k > 0 {
			n.Logger.Warn("runs of dead nodes marked lost", "runs", k)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// stateNotFound decides on a submission whose state a read did not find.
// The read came from the bucket's leader, but the decision does not rest
// on it: the node creates the state itself, refused, with a
// compare-and-set on "no such key". A submitter writes the state before
// it publishes, so that create fails for every real submission (the
// message is delivered again, and taken once its state is seen) and
// succeeds only for a message that was never one, which is then dropped,
// recorded in the bucket under its id.
func (n *Node) stateNotFound(ctx context.Context, msg jetstream.Msg, id string) {
	st, _ := json.Marshal(RunState{ID: id, State: StateRefused, Submitted: time.Now().UTC(), Ended: time.Now().UTC(),
		Error: "node " + n.Name + " took a message with no submission state (not published by Submit): dropped unrun"})
	cctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	_, err := n.Fleet.States.Create(cctx, id, st)
	switch {
	case err == nil:
		n.Logger.Warn("a submission with no state: dropped, recorded refused", "submission", id)
		msg.Term()
	case errors.Is(err, jetstream.ErrKeyExists):
		n.Logger.Debug("a submission whose state exists but was not read: delivered again", "submission", id)
		msg.NakWithDelay(200 * time.Millisecond)
	default:
		msg.Nak() // the bucket is unreachable: try later
	}
}

// take claims a submission and runs it.
func (n *Node) take(ctx context.Context, msg jetstream.Msg) {
	var s Submission
	if err := json.Unmarshal(msg.Data(), &s); err != nil || s.ID == "" {
		n.Logger.Warn("a submission that does not decode: dropped", "error", err)
		msg.Term()
		return
	}
	st, rev, err := n.Fleet.State(ctx, s.ID)
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			n.stateNotFound(ctx, msg, s.ID)
		} else {
			msg.Nak() // the bucket is unreachable: try later
		}
		return
	}
	if st.State == StateRunning && st.Retry > 0 {
		// A run that may be retried keeps its message until it ends:
		// delivered again while another node runs it, it is handed back
		// for later, and taken if the fleet queues it again.
		msg.NakWithDelay(ackWait)
		return
	}
	if st.State != StateQueued {
		msg.Ack() // another node's, or lost: never run twice
		return
	}
	if n.fence() != nil {
		msg.Nak() // a node whose lease expired claims nothing
		return
	}
	st.State, st.Node, st.Started = StateRunning, n.Name, time.Now().UTC()
	st.Incarnation, st.Token = n.Incarnation, rev
	st.Attempt, st.Error = st.Attempt+1, "" // an earlier attempt's loss is in st.Lost
	ok, err := n.Fleet.swap(ctx, st, rev)
	if err != nil {
		// The write may have happened with its answer lost: the state
		// says whether the claim is ours.
		cur, _, rerr := n.Fleet.State(ctx, s.ID)
		switch {
		case rerr == nil && n.ours(cur, st.Token):
			ok = true
		case rerr != nil || cur.State == StateQueued:
			msg.Nak() // not claimed: delivered again later
			return
		}
		// Otherwise another node's claim (or a final state): not ours.
	}
	if !ok {
		if st.Retry > 0 {
			msg.NakWithDelay(ackWait)
		} else {
			msg.Ack()
		}
		return
	}
	settle := settleLeave
	if st.Retry == 0 {
		// The claim is ours: acknowledge before running, so the
		// submission is never delivered again (at most once).
		if err := msg.DoubleAck(ctx); err != nil {
			n.Logger.Warn("acknowledging a claimed submission", "submission", s.ID, "error", err)
		}
	} else {
		// Retry: the message stays unacknowledged while the run lasts
		// (kept alive by progress notes), so that if this node dies the
		// stream delivers it again and, once the fleet has queued the
		// run again, another node takes the next attempt.
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			t := time.NewTicker(ackWait / 3)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					msg.InProgress()
				}
			}
		}()
		defer func() {
			switch settle {
			case settleAck:
				if err := msg.DoubleAck(context.WithoutCancel(ctx)); err != nil {
					n.Logger.Warn("acknowledging a retryable submission", "submission", s.ID, "error", err)
				}
			case settleAgain:
				// Queued again (this attempt was lost or killed as the
				// lease expired): the next attempt is this message's next
				// delivery.
				msg.Nak()
			}
			// settleLeave: the state is not this attempt's to settle; the
			// message is delivered again after ackWait and whoever takes
			// it reads the state.
		}()
	}
	n.running.Add(1)
	defer n.running.Add(-1)
	rctx, cancel := context.WithCancel(ctx)
	n.mu.Lock()
	n.cancels[s.ID] = cancel
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(n.cancels, s.ID)
		n.mu.Unlock()
		cancel()
	}()
	final := n.execute(rctx, s, st)
	// Killed as this node fenced itself (not as it stops: ctx).
	killed := n.fenced.Load() && rctx.Err() != nil && ctx.Err() == nil
	// The record first: a run whose state says it ended has its record
	// in the fleet.
	n.copyRecord(context.WithoutCancel(ctx), final.RunID)
	settle = n.finish(context.WithoutCancel(ctx), final, killed)
	n.copyAudit(context.WithoutCancel(ctx))
}

// execute runs a claimed submission and returns its final state.
func (n *Node) execute(ctx context.Context, s Submission, st RunState) RunState {
	refuse := func(format string, args ...any) RunState {
		st.State, st.Error, st.Ended = StateRefused, fmt.Sprintf(format, args...), time.Now().UTC()
		return st
	}
	dir, err := os.MkdirTemp(n.WorkDir, "run-"+s.ID[:8]+"-*")
	if err != nil {
		return refuse("node %s: %v", n.Name, err)
	}
	defer os.RemoveAll(dir)
	if !fs.ValidPath(s.Manifest) || path.Base(s.Manifest) != s.Manifest {
		return refuse("manifest name %q is not a file name", s.Manifest)
	}
	for rel, f := range s.Files {
		if !fs.ValidPath(rel) || rel == "." {
			return refuse("file path %q is not inside the manifest's folder", rel)
		}
		data := f.Data
		if f.Module != "" {
			b, err := n.module(ctx, f.Module)
			if err != nil {
				return refuse("%v", err)
			}
			data = b
		}
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return refuse("node %s: %v", n.Name, err)
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			return refuse("node %s: %v", n.Name, err)
		}
	}
	if s.Module == "" {
		return refuse("the submission names no module")
	}
	module, err := n.module(ctx, s.Module)
	if err != nil {
		return refuse("%v", err)
	}
	mpath := filepath.Join(dir, s.Manifest)
	m, err := manifest.Parse(s.Source, mpath, dir, s.Vars)
	if err != nil {
		return refuse("%v", err)
	}
	if m.Retry != s.Retry {
		return refuse("the submission says retry %d, its manifest %d", s.Retry, m.Retry)
	}
	// The seed is the submission: every attempt derives the same
	// idempotency keys from it.
	spec := host.RunSpec{Manifest: m, Input: s.Input, Module: module, Logger: n.Logger.With("submission", s.ID),
		Placer: &placer{n: n, run: s.ID, compile: m.Limits().CompileLimits()}, Seed: s.ID, Fence: n.fence,
		// What is known, as soon as it is, and before the task can act:
		// were this node to die once the task has begun, the lost run
		// names its record in this node's state directory.
		Begun: func(id string) {
			st.RunID = id
			n.annotate(ctx, st, func(cur *RunState) { cur.RunID = id })
		}}
	if s.Receipt {
		spec.Receipt = filepath.Join(dir, ".receipt")
	}
	r, err := n.Host.Start(ctx, spec)
	if err != nil {
		var re *host.RefusedError
		if errors.As(err, &re) {
			st.RunID = re.Record.Run.ID
		}
		return refuse("%v", err)
	}
	st.RunID = r.ID()
	out, err := r.Wait(context.WithoutCancel(ctx))
	if err != nil {
		st.State, st.Error, st.Ended = StateDone, err.Error(), time.Now().UTC()
		st.Exit = host.ExitUsage
		return st
	}
	st.State, st.Exit, st.Ended = StateDone, out.Exit, time.Now().UTC()
	st.Result, st.HasResult = out.Result, out.HasResult
	if !out.ResultLabel.IsZero() {
		st.ResultLabel, _ = json.Marshal(out.ResultLabel)
	}
	if out.Err != nil {
		st.Error = out.Err.Error()
	}
	if s.Receipt {
		if b, err := os.ReadFile(spec.Receipt); err == nil && out.ReceiptErr == nil {
			st.Receipt = b
		} else {
			why := "no receipt: " + errors.Join(out.ReceiptErr, err).Error()
			if st.Error != "" {
				why = st.Error + "; " + why
			}
			st.Error = why
		}
	}
	return st
}

// ours reports whether cur is this node's claim of token, running.
func (n *Node) ours(cur RunState, token uint64) bool {
	return cur.State == StateRunning && cur.Node == n.Name && cur.Incarnation == n.Incarnation && cur.Token == token
}

// annotate changes this node's running state of a claimed submission (a
// few tries; the state may move on only through a lost mark).
func (n *Node) annotate(ctx context.Context, claimed RunState, change func(*RunState)) {
	for i := 0; i < 3; i++ {
		cur, rev, err := n.Fleet.State(ctx, claimed.ID)
		if err != nil || !n.ours(cur, claimed.Token) {
			return
		}
		change(&cur)
		if ok, err := n.Fleet.swap(ctx, cur, rev); err == nil && ok {
			return
		}
	}
}

// module returns the module of digest d: from this node's copy when it
// has one that still hashes to d, else from the fleet's object store,
// checked against d on arrival and kept.
func (n *Node) module(ctx context.Context, d string) ([]byte, error) {
	if !sandbox.IsDigest(d) {
		return nil, fmt.Errorf("module %q is not a digest", d)
	}
	if b, ok := n.mods.get(d); ok {
		return b, nil // checked when it was kept; memory is not a file others write
	}
	// One fetch per module: the runs that need a module a node lacks wait
	// for the first to bring it, rather than each pulling megabytes.
	mu := n.fetchLock(d)
	mu.Lock()
	defer mu.Unlock()
	if b, ok := n.mods.get(d); ok {
		return b, nil
	}
	// A cluster electing a leader, or a node starting under load, may
	// time a fetch out: tried again, for up to two minutes.
	var (
		b   []byte
		err error
	)
	wait := 250 * time.Millisecond
	deadline := time.Now().Add(2 * time.Minute)
	for {
		b, err = n.fetchModule(ctx, d)
		if err == nil || errors.Is(err, errForged) || ctx.Err() != nil || time.Now().After(deadline) {
			break
		}
		n.Logger.Warn("fetching a module; retrying", "module", d, "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
	if err == nil {
		n.mods.put(d, b)
	}
	return b, err
}

// fetchLock is the lock of fetching module d.
func (n *Node) fetchLock(d string) *sync.Mutex {
	n.fetchMu.Lock()
	defer n.fetchMu.Unlock()
	if n.fetching == nil {
		n.fetching = map[string]*sync.Mutex{}
	}
	mu, ok := n.fetching[d]
	if !ok {
		mu = &sync.Mutex{}
		n.fetching[d] = mu
	}
	return mu
}

// errForged is a module whose bytes do not hash to its name: never tried
// again.
var errForged = errors.New("its bytes have another digest")

// fetchModule is module without the memory: the node's copy on disk when
// it still hashes to d, else the object store's, checked and kept.
func (n *Node) fetchModule(ctx context.Context, d string) ([]byte, error) {
	p := filepath.Join(n.WorkDir, "modules", d[len("sha256:"):]+".wasm")
	if b, err := os.ReadFile(p); err == nil && sandbox.Digest(b) == d {
		return b, nil
	}
	gctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b, err := n.Fleet.Modules.GetBytes(gctx, d)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", d, err)
	}
	if got := sandbox.Digest(b); got != d {
		return nil, fmt.Errorf("module %s arrived with digest %s: not run (%w)", d, got, errForged)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err == nil {
		tmp, err := os.CreateTemp(filepath.Dir(p), ".module-*")
		if err == nil {
			_, werr := tmp.Write(b)
			if cerr := tmp.Close(); werr == nil && cerr == nil {
				os.Rename(tmp.Name(), p)
			}
			os.Remove(tmp.Name())
		}
	}
	return b, nil
}

// moduleMemory keeps the last maxKeptModules modules a node checked, by
// digest, so a run of a module seen before neither reads nor hashes it
// again (a Go guest is megabytes: hashing it was a quarter of a run's CPU).
type moduleMemory struct {
	mu    sync.Mutex
	order []string // least recently used first
	bytes map[string][]byte
}

const maxKeptModules = 8

func (m *moduleMemory) get(d string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.bytes[d]
	if ok {
		m.touch(d)
	}
	return b, ok
}

func (m *moduleMemory) put(d string, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.bytes == nil {
		m.bytes = map[string][]byte{}
	}
	if _, ok := m.bytes[d]; !ok && len(m.order) >= maxKeptModules {
		delete(m.bytes, m.order[0])
		m.order = m.order[1:]
	}
	m.bytes[d] = b
	m.touch(d)
}

func (m *moduleMemory) touch(d string) {
	if i := slices.Index(m.order, d); i >= 0 {
		m.order = slices.Delete(m.order, i, i+1)
	}
	m.order = append(m.order, d)
}

// settle is what becomes of a retryable submission's message once its
// run ended here.
type settle int

const (
	settleLeave settle = iota // not this attempt's: redelivered after ackWait
	settleAck                 // the run's state is final
	settleAgain               // the run was queued again: deliver it again now
)

// finish writes a run's end over this node's claim of it, checked by the
// claim's node, incarnation and fencing token, so it never writes over
// another attempt's claim (the run was queued again after a lost mark) or
// over a final state. When the fleet marked the claim lost meanwhile, the
// state stays lost and After says how the run ended here. A run this node
// killed as its lease expired ends lost (or queued again, as a dead
// node's would). It returns what to do with a retryable submission's
// message.
func (n *Node) finish(ctx context.Context, final RunState, killed bool) settle {
	// The outcome must be written: retried (the cluster may be electing
	// leaders) for up to five minutes, and for ten seconds from when the
	// node fences itself, if it does (it is likely cut off, and exits
	// without it: its runs are the fleet's to mark lost).
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	go func() {
		select {
		case <-ctx.Done():
		case <-n.fencedC:
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
				cancel()
			}
		}
	}()
	wait := 100 * time.Millisecond
	for ctx.Err() == nil {
		cur, rev, err := n.Fleet.State(ctx, final.ID)
		if err == nil {
			if cur.State == StateQueued {
				n.Logger.Warn("the run was queued again while it ran here: its end here is not written",
					"submission", final.ID, "run", final.RunID)
				return settleAgain
			}
			if cur.Node != n.Name || cur.Incarnation != n.Incarnation || cur.Token != final.Token {
				n.Logger.Warn("the run's state is no longer this node's claim: its end here is not written",
					"submission", final.ID, "run", final.RunID, "state", cur.State, "node", cur.Node)
				return settleLeave
			}
			var ok bool
			next := settleAck
			switch {
			case cur.State == StateLost && cur.After == "":
				cur.After = fmt.Sprintf("then ended on %s at %s: %s (exit %d)%s", n.Name, final.Ended.Format(time.RFC3339Nano), final.State, final.Exit, joinErr(final.Error))
				ok, err = n.Fleet.swap(ctx, cur, rev)
			case cur.State != StateRunning:
				return settleAck // final already: never written over
			case killed:
				if cur.Retry > 0 && cur.Attempt <= cur.Retry {
					next = settleAgain
				}
				ok, err = n.Fleet.markLost(ctx, cur, rev, "fenced itself (its lease of "+n.LostAfter.String()+" expired: no heartbeat got through) and killed the run")
			default:
				ok, err = n.Fleet.swap(ctx, final, rev)
			}
			if err == nil && ok {
				return next
			}
		}
		if err != nil {
			n.Logger.Warn("ending a run's state; retrying", "submission", final.ID, "error", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
	n.Logger.Error("the outcome of a run could not be written to the fleet", "submission", final.ID, "run", final.RunID)
	return settleLeave
}

func joinErr(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}
