//go:build unix

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mandatevm/mandate/fleet"
	"github.com/nats-io/nats.go/jetstream"
)

// update is one revision of a submission's state.
type update struct {
	Rev uint64
	At  time.Time // the entry's time in the stream (zero when unknown)
	Via string    // watch, history or get
	Op  jetstream.KeyValueOp
	S   fleet.RunState
	Bad string // the value did not decode
}

// history records every update of MANDATE_RUN_STATE: a WatchAll running
// from before the first submission, completed by each key's History (up to
// 8 revisions) and by reads, should the watch miss some while its consumer
// moves to another server.
type history struct {
	mu      sync.Mutex
	byKey   map[string][]update // sorted by revision
	lastRev uint64              // the last revision the watch delivered
	gaps    []string            // revisions the watch skipped
	ended   error               // the watch stopped before the test's end
}

// watchStates starts recording; it stops when ctx ends.
func watchStates(ctx context.Context, f *fleet.Fleet) (*history, error) {
	h := &history{byKey: map[string][]update{}}
	w, err := f.States.WatchAll(ctx)
	if err != nil {
		return nil, err
	}
	go func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					h.mu.Lock()
					if ctx.Err() == nil {
						h.ended = fmt.Errorf("the watch of %s ended", fleet.BucketRuns)
					}
					h.mu.Unlock()
					return
				}
				if e == nil {
					continue // the initial values are all delivered
				}
				h.mu.Lock()
				if h.lastRev != 0 && e.Revision() != h.lastRev+1 {
					h.gaps = append(h.gaps, fmt.Sprintf("%d..%d", h.lastRev+1, e.Revision()-1))
				}
				h.lastRev = max(h.lastRev, e.Revision())
				h.mu.Unlock()
				h.add(e.Key(), entryUpdate(e, "watch"))
			}
		}
	}()
	return h, nil
}

func entryUpdate(e jetstream.KeyValueEntry, via string) update {
	u := update{Rev: e.Revision(), At: e.Created(), Via: via, Op: e.Operation()}
	if e.Operation() == jetstream.KeyValuePut {
		if err := json.Unmarshal(e.Value(), &u.S); err != nil {
			u.Bad = fmt.Sprintf("%v: %q", err, e.Value())
		}
	}
	return u
}

// add records u under key unless its revision is known.
func (h *history) add(key string, u update) {
	h.mu.Lock()
	defer h.mu.Unlock()
	us := h.byKey[key]
	i, found := slices.BinarySearchFunc(us, u.Rev, func(x update, rev uint64) int {
		switch {
		case x.Rev < rev:
			return -1
		case x.Rev > rev:
			return 1
		}
		return 0
	})
	if found {
		return
	}
	h.byKey[key] = slices.Insert(us, i, u)
}

// of returns key's updates, by revision.
func (h *history) of(key string) []update {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.byKey[key])
}

// latest is key's latest known state.
func (h *history) latest(key string) (update, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	us := h.byKey[key]
	if len(us) == 0 {
		return update{}, false
	}
	return us[len(us)-1], true
}

// complete adds what the bucket still holds of key's history.
func (h *history) complete(ctx context.Context, f *fleet.Fleet, key string) error {
	gctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	es, err := f.States.History(gctx, key)
	if err != nil {
		return err
	}
	for _, e := range es {
		h.add(key, entryUpdate(e, "history"))
	}
	return nil
}

// problems says what the watch missed or why it stopped.
func (h *history) problems() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := ""
	if len(h.gaps) > 0 {
		s = fmt.Sprintf("the watch skipped revisions %v (filled from each key's history)", h.gaps)
	}
	if h.ended != nil {
		s += fmt.Sprintf("; %v", h.ended)
	}
	return s
}

// beats records every heartbeat the nodes write (MANDATE_NODES), for the
// longest silence of each node during a fault.
type beats struct {
	mu     sync.Mutex
	byNode map[string][]time.Time // each heartbeat's Time, in order
}

func watchBeats(ctx context.Context, f *fleet.Fleet) (*beats, error) {
	b := &beats{byNode: map[string][]time.Time{}}
	w, err := f.Nodes.WatchAll(ctx)
	if err != nil {
		return nil, err
	}
	go func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil || e.Operation() != jetstream.KeyValuePut {
					continue
				}
				var h fleet.Heartbeat
				if json.Unmarshal(e.Value(), &h) != nil {
					continue
				}
				b.mu.Lock()
				b.byNode[e.Key()] = append(b.byNode[e.Key()], h.Time)
				b.mu.Unlock()
			}
		}
	}()
	return b, nil
}

// longestGap is node's longest time between heartbeats written between
// from and to (bounded by them).
func (b *beats) longestGap(node string, from, to time.Time) (gap time.Duration, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	last := from
	for _, t := range b.byNode[node] {
		if t.Before(from) {
			last = from
			continue
		}
		if t.After(to) {
			break
		}
		if d := t.Sub(last); d > gap {
			gap, at = d, last
		}
		last = t
	}
	if d := to.Sub(last); d > gap {
		gap, at = d, last
	}
	return gap, at
}
