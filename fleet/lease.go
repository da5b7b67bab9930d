package fleet

// Leases. A node holds its runs under a lease: each heartbeat that gets
// through renews it for LostAfter, counted from the moment the heartbeat
// was sent (not answered), on the node's own clocks. Every effect of the
// node's runs asks the lease first (kernel.Config.Fence), and the node
// kills its runs the moment the lease lapses. Another node, or a
// submitter, declares the node's runs lost only when the node's
// heartbeat has not changed for its lease plus a safety margin, by the
// observer's own monotonic clock, counted from when the observer saw the
// last heartbeat (which was sent before it was seen), and a read from the
// bucket's leader confirms it. So, provided the two clocks run at rates
// within the margin of each other, the node's lease has expired before
// anyone declares its run lost: a paused node that wakes finds its lease
// expired and refuses the effect, and no effect follows a lost mark. What
// a lease cannot cover, no lease can: an effect already past the fence
// when the node is paused (a request half sent), performed when it
// resumes. docs/fleet.md states the assumptions.
//
// Fencing tokens. A claim records, in the run's state, the revision of the
// queued state it replaced (RunState.Token): unique to the claim, larger
// for each later attempt. Every later write of the run's state by its node
// is a compare-and-set on the current revision that also requires the
// state to carry the node's token, so a node whose attempt was declared
// lost and queued again never writes over the next attempt, and nothing
// writes over a final state.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Margin is how long past a node's lease another node waits before it
// declares the node's runs lost: half the lease. It covers the
// difference of the two machines' clock rates and the time between a
// node's fence check and its effect.
func Margin(lease time.Duration) time.Duration { return lease / 2 }

// lease is a node incarnation's lease on its runs. It is valid while both
// the monotonic clock (which stops when the machine is suspended, on
// Linux) and the wall clock (which does not) say that less than d has
// passed since the last heartbeat that got through was sent.
type lease struct {
	d    time.Duration
	base time.Time    // the monotonic origin
	mono atomic.Int64 // expiry, in ns since base
	wall atomic.Int64 // expiry, Unix ns
}

func newLease(d time.Duration) *lease {
	return &lease{d: d, base: time.Now()}
}

// renewed extends the lease to sent+d, sent being when the heartbeat
// that got through was sent; it never shortens it.
func (l *lease) renewed(sent time.Time) {
	mono := int64(sent.Sub(l.base) + l.d)
	for {
		cur := l.mono.Load()
		if mono <= cur || l.mono.CompareAndSwap(cur, mono) {
			break
		}
	}
	wall := sent.UnixNano() + int64(l.d)
	for {
		cur := l.wall.Load()
		if wall <= cur || l.wall.CompareAndSwap(cur, wall) {
			break
		}
	}
}

// valid reports why the lease is no longer valid, or nil.
func (l *lease) valid() error {
	now := time.Now()
	if int64(now.Sub(l.base)) >= l.mono.Load() {
		return kindapi.Errorf(abi.EINTERNAL, "this node's lease on the run has expired (no heartbeat got through for %s): it performs nothing more for it", l.d)
	}
	if now.UnixNano() >= l.wall.Load() {
		return kindapi.Errorf(abi.EINTERNAL, "this node's lease on the run has expired by the wall clock (%s since the last heartbeat that got through), not yet by the monotonic clock: the machine was suspended, or its clock stepped; it performs nothing more for the run", l.d)
	}
	return nil
}

// lastFor reads the last message of subject in stream from the stream's
// leader (STREAM.MSG.GET, not a direct get, which any replica may answer
// from behind): a read that cannot be stale, for the decisions that
// depend on it. A key deleted or purged is jetstream.ErrKeyNotFound.
func lastFor(ctx context.Context, nc *nats.Conn, stream, subject string) (data []byte, seq uint64, err error) {
	req, _ := json.Marshal(map[string]string{"last_by_subj": subject})
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	m, err := nc.RequestWithContext(ctx, jsAPI+"STREAM.MSG.GET."+stream, req)
	if err != nil {
		return nil, 0, err
	}
	var resp struct {
		Message *struct {
			Seq  uint64 `json:"seq"`
			Hdrs []byte `json:"hdrs"`
			Data []byte `json:"data"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, 0, fmt.Errorf("fleet: reading %s: %w", subject, err)
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, 0, jetstream.ErrKeyNotFound
		}
		return nil, 0, resp.Error
	}
	if resp.Message == nil {
		return nil, 0, fmt.Errorf("fleet: reading %s: an empty answer", subject)
	}
	if len(resp.Message.Hdrs) > 0 {
		h, err := nats.DecodeHeadersMsg(resp.Message.Hdrs)
		if err == nil {
			if op := h.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
				return nil, resp.Message.Seq, jetstream.ErrKeyNotFound
			}
		}
	}
	return resp.Message.Data, resp.Message.Seq, nil
}

// liveness is an observer's view of the fleet's heartbeats: for each node
// incarnation, the last heartbeat seen and when (by this process's
// monotonic clock). It is fed by a watch of MANDATE_NODES and by the
// leader reads that confirm a death.
type liveness struct {
	f       *Fleet
	started time.Time // when the watch started: what an unseen node is judged from
	lease   time.Duration

	mu    sync.Mutex
	nodes map[string]*seenBeat // by node name: its latest heartbeat
	incs  map[string]time.Time // by node/incarnation: when a heartbeat of it was last seen
	ready chan struct{}        // closed once the watch delivered what the bucket held
}

type seenBeat struct {
	rev uint64
	at  time.Time
	hb  Heartbeat
	// initial: delivered with what the bucket held when the watch
	// started, so at is when this observer started, not when the node
	// beat.
	initial bool
}

// watchLiveness starts watching the heartbeats until ctx ends; lease is
// what a node that publishes none is judged by.
func (f *Fleet) watchLiveness(ctx context.Context, lease time.Duration) (*liveness, error) {
	l := &liveness{f: f, started: time.Now(), lease: lease, nodes: map[string]*seenBeat{}, incs: map[string]time.Time{}, ready: make(chan struct{})}
	w, err := f.Nodes.WatchAll(ctx)
	if err != nil {
		return nil, err
	}
	go func() {
		defer w.Stop()
		ready := false
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil {
					if !ready {
						ready = true
						close(l.ready)
					}
					continue
				}
				if e.Operation() != jetstream.KeyValuePut {
					continue
				}
				var hb Heartbeat
				if json.Unmarshal(e.Value(), &hb) == nil {
					l.observe(e.Key(), e.Revision(), hb, !ready)
				}
			}
		}
	}()
	return l, nil
}

// observe records heartbeat hb of node at revision rev, seen now.
func (l *liveness) observe(node string, rev uint64, hb Heartbeat, initial bool) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.nodes[node]
	if s != nil && rev <= s.rev {
		return // a stale read or a repeat: it says nothing new
	}
	l.nodes[node] = &seenBeat{rev: rev, at: now, hb: hb, initial: initial}
	l.incs[node+"/"+hb.Incarnation] = now
}

// leaseOf is the lease node published, or the observer's default.
func (l *liveness) leaseOf(hb Heartbeat) time.Duration {
	if hb.Lease > 0 {
		return hb.Lease
	}
	return l.lease
}

// silent reports whether incarnation inc of node ("" for any) has shown
// no heartbeat for its lease plus the margin, by this observer's clock,
// and for how long. A node never seen is judged from when the watch
// started.
func (l *liveness) silent(node, inc string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lease := l.lease
	at := l.started
	if s := l.nodes[node]; s != nil {
		lease = l.leaseOf(s.hb)
		if inc == "" || s.hb.Incarnation == inc {
			at = s.at
		} else if t, ok := l.incs[node+"/"+inc]; ok {
			at = t
		}
	}
	since := time.Since(at)
	return since > lease+Margin(lease), since
}

// refresh reads node's heartbeat from the bucket's leader and records it
// if it is newer than what the watch delivered (a watch lagging under
// load, or stalled while the cluster elects a leader).
func (l *liveness) refresh(ctx context.Context, node string) error {
	data, rev, err := lastFor(ctx, l.f.JS.Conn(), "KV_"+BucketNodes, "$KV."+BucketNodes+"."+node)
	if err != nil {
		return err
	}
	var hb Heartbeat
	if err := json.Unmarshal(data, &hb); err != nil {
		return err
	}
	l.observe(node, rev, hb, false)
	return nil
}

// known lists the nodes this observer has seen a heartbeat of.
func (l *liveness) known() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.nodes))
	for name := range l.nodes {
		out = append(out, name)
	}
	return out
}

// dead reports whether incarnation inc of node is dead: silent, and a
// read of its heartbeat from the bucket's leader shows nothing newer. A
// read that fails proves nothing: not dead.
func (l *liveness) dead(ctx context.Context, node, inc string) (bool, string) {
	silent, _ := l.silent(node, inc)
	if !silent {
		return false, ""
	}
	if err := l.refresh(ctx, node); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, ""
	}
	silent, since := l.silent(node, inc)
	if !silent {
		return false, ""
	}
	l.mu.Lock()
	lease := l.lease
	if s := l.nodes[node]; s != nil {
		lease = l.leaseOf(s.hb)
	}
	l.mu.Unlock()
	return true, fmt.Sprintf("no heartbeat for %s, past its lease of %s and the margin of %s", since.Round(time.Millisecond), lease, Margin(lease))
}

// live lists the nodes whose latest heartbeat was seen within their
// lease (for placing a child: a mistake costs a placement that is not
// answered, never an effect). A heartbeat that was in the bucket when
// the watch started is judged by the time it carries.
func (l *liveness) live() map[string]Heartbeat {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]Heartbeat{}
	for name, s := range l.nodes {
		lease := l.leaseOf(s.hb)
		if time.Since(s.at) < lease && (!s.initial || time.Since(s.hb.Time) < lease) {
			out[name] = s.hb
		}
	}
	return out
}

// waitReady waits until the watch delivered what the bucket held.
func (l *liveness) waitReady(ctx context.Context) error {
	select {
	case <-l.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
