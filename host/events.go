package host

import (
	"sync"
	"time"

	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// EventKind names what happened in a run.
type EventKind string

const (
	// EventStarted: the run's root task started (Task).
	EventStarted EventKind = "started"
	// EventSpawned: a task started a child (Task, Parent).
	EventSpawned EventKind = "spawned"
	// EventCalled: a decision on an audited capability was written to the
	// audit log: allowed before its effect, then its outcome (Decision
	// "allow" or "outcome"). Uses of capabilities that are not audited
	// are not events: watching them would cost every call.
	EventCalled EventKind = "called"
	// EventDenied: the kernel refused a call (Cap, Op, Errno, Reason).
	EventDenied EventKind = "denied"
	// EventFlowed: labelled data met a sink: an EFLOW refusal, a
	// declassification, or an audited call by a labelled task (Label).
	EventFlowed EventKind = "flowed"
	// EventEnded: a task ended (State).
	EventEnded EventKind = "ended"
	// EventDone: the run ended and is recorded (State, Reason: the root
	// task's error); the last event of a run.
	EventDone EventKind = "done"
)

// Event is one thing that happened in a run. Strings in it were chosen by
// guests (reasons, for instance): escape them before a terminal or a page
// shows them.
type Event struct {
	Kind     EventKind        `json:"kind"`
	Run      string           `json:"run"`
	Time     time.Time        `json:"time"`
	Task     string           `json:"task,omitempty"`
	Parent   string           `json:"parent,omitempty"`
	Cap      string           `json:"cap,omitempty"`
	CapKind  string           `json:"cap_kind,omitempty"`
	Op       string           `json:"op,omitempty"`
	Decision string           `json:"decision,omitempty"`
	Errno    string           `json:"errno,omitempty"`
	Reason   string           `json:"reason,omitempty"`
	State    kernel.TaskState `json:"state,omitempty"`
	Label    kindapi.Label    `json:"label,omitzero"`
	// Dropped counts the events this subscriber missed just before this
	// one, its channel being full.
	Dropped int `json:"dropped,omitempty"`
}

// fanout sends events to subscribers without ever waiting for one.
type fanout struct {
	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	closed bool
}

type subscriber struct {
	ch      chan Event
	dropped int // protected by fanout.mu
}

func (f *fanout) add(buffer int) (<-chan Event, func()) {
	if buffer < 1 {
		buffer = 1
	}
	s := &subscriber{ch: make(chan Event, buffer)}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		close(s.ch)
		return s.ch, func() {}
	}
	if f.subs == nil {
		f.subs = map[*subscriber]struct{}{}
	}
	f.subs[s] = struct{}{}
	return s.ch, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, ok := f.subs[s]; ok {
			delete(f.subs, s)
			close(s.ch)
		}
	}
}

func (f *fanout) send(e Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.subs {
		e := e
		e.Dropped = s.dropped
		select {
		case s.ch <- e:
			s.dropped = 0
		default:
			s.dropped++
		}
	}
}

func (f *fanout) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for s := range f.subs {
		close(s.ch)
	}
	f.subs = nil
}
