package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// markLost ends a running state s (read at revision rev) because its node
// is gone, saying why: queued again when the run may be retried and has
// attempts left, lost otherwise. It is a compare-and-set on rev: false
// when the state moved on.
func (f *Fleet) markLost(ctx context.Context, s RunState, rev uint64, why string) (bool, error) {
	s.Lost = append(s.Lost, fmt.Sprintf("%s (run %s, attempt %d)", s.Node, s.RunID, s.Attempt))
	if s.Retry > 0 && s.Attempt <= s.Retry {
		// The manifest opted in and every capability was checked
		// repeatable: queued again, for the next delivery of the
		// submission (its message is acknowledged only at the end).
		s.Error = fmt.Sprintf("node %s: %s, during attempt %d of %d; queued again", s.Node, why, s.Attempt, s.Retry+1)
		s.State, s.Node, s.RunID, s.Incarnation, s.Token = StateQueued, "", "", "", 0
		return f.swap(ctx, s, rev)
	}
	s.State = StateLost
	s.Error = fmt.Sprintf("node %s: %s, while the run was running; it was not re-run", s.Node, why)
	if s.Retry > 0 {
		s.Error = fmt.Sprintf("node %s: %s, during the last of %d attempts", s.Node, why, s.Retry+1)
	}
	s.Ended = time.Now().UTC()
	return f.swap(ctx, s, rev)
}

// reapOne marks submission id lost (or queued again) if it is running on
// a node incarnation live judges dead; it reports whether it did.
func (f *Fleet) reapOne(ctx context.Context, live *liveness, id string) (bool, error) {
	s, rev, err := f.State(ctx, id)
	if err != nil || s.State != StateRunning {
		return false, err
	}
	dead, why := live.dead(ctx, s.Node, s.Incarnation)
	if !dead {
		return false, nil
	}
	return f.markLost(ctx, s, rev, "stopped answering ("+why+")")
}

// claim is a running state as the reaper's index holds it.
type claim struct {
	node, inc string
	token     uint64
}

// reaper keeps the index of running claims (a watch of MANDATE_RUN_STATE:
// each update adds or removes one, so a pass costs what runs now, not
// every run ever submitted) and marks lost the runs of dead nodes.
type reaper struct {
	f    *Fleet
	live *liveness
	// self and inc are this node and its incarnation; prev is the
	// incarnation that ran on this node's state directory before it, whose
	// runs this one ends at once (its process is gone: see nodeLock).
	self, inc, prev string

	mu      sync.Mutex
	running map[string]claim
	ready   chan struct{}
}

// watchClaims starts the index's watch until ctx ends.
func (f *Fleet) watchClaims(ctx context.Context, live *liveness) (*reaper, error) {
	r := &reaper{f: f, live: live, running: map[string]claim{}, ready: make(chan struct{})}
	w, err := f.States.WatchAll(ctx)
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
						close(r.ready)
					}
					continue
				}
				var s RunState
				running := e.Operation() == jetstream.KeyValuePut && json.Unmarshal(e.Value(), &s) == nil && s.State == StateRunning
				r.mu.Lock()
				if running {
					r.running[e.Key()] = claim{node: s.Node, inc: s.Incarnation, token: s.Token}
				} else {
					delete(r.running, e.Key())
				}
				r.mu.Unlock()
			}
		}
	}()
	return r, nil
}

// pass judges every running claim once and returns how many it ended.
func (r *reaper) pass(ctx context.Context) int {
	r.mu.Lock()
	ids := make(map[string]claim, len(r.running))
	for id, c := range r.running {
		ids[id] = c
	}
	r.mu.Unlock()
	n := 0
	for id, c := range ids {
		if ctx.Err() != nil {
			break
		}
		if c.node == r.self && c.inc == r.inc {
			continue // a node never declares itself dead: it fences itself
		}
		if c.node == r.self && c.inc != "" && c.inc == r.prev {
			// This node's previous process, on this state directory: it
			// is gone (this process holds the directory's lock).
			s, rev, err := r.f.State(ctx, id)
			if err != nil || s.State != StateRunning || s.Node != r.self || s.Incarnation != c.inc {
				continue
			}
			if ok, _ := r.f.markLost(ctx, s, rev, "restarted (its process "+c.inc+" is gone)"); ok {
				n++
			}
			continue
		}
		if silent, _ := r.live.silent(c.node, c.inc); !silent {
			continue
		}
		if ok, _ := r.f.reapOne(ctx, r.live, id); ok {
			n++
		}
	}
	return n
}
