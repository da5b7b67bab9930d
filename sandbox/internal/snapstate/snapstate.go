// Package snapstate is what both engines share of taking a module's
// snapshot from a task's own _initialize (see sandbox/wazero's
// snapshot.go): where the taking stands, and the watch on that init's
// output. What is read from an instance, and how a snapshot is compiled
// and kept, is each engine's.
package snapstate

import (
	"io"
	"sync"
	"sync/atomic"
)

// States of a Taker.
const (
	open   int32 = iota // a task's init may give the snapshot
	taking              // a task's init is being kept
	closed              // taken, or refused
)

// Taker is where taking one module's snapshot stands: open until a task's
// init is claimed, then taking until the snapshot is installed or refused,
// then closed for good. Safe for concurrent use.
type Taker struct {
	state atomic.Int32
	done  chan struct{}
	once  sync.Once
}

// NewTaker returns an open Taker.
func NewTaker() *Taker { return &Taker{done: make(chan struct{})} }

// Open reports whether a task's init may still give the snapshot.
func (t *Taker) Open() bool { return t.state.Load() == open }

// Claim makes the caller's init the one kept, when the Taker is open; it
// reports whether it did.
func (t *Taker) Claim() bool { return t.state.CompareAndSwap(open, taking) }

// Pending reports whether a claimed init is not yet installed or refused.
func (t *Taker) Pending() bool { return t.state.Load() == taking }

// Close closes the Taker for good.
func (t *Taker) Close() {
	t.state.Store(closed)
	t.once.Do(func() { close(t.done) })
}

// Done is closed once the Taker is.
func (t *Taker) Done() <-chan struct{} { return t.done }

// Output notes that a watched init wrote output: a task started from a
// snapshot would not write it.
type Output struct{ wrote atomic.Bool }

// Writer returns out, noting in o each write of some bytes.
func (o *Output) Writer(out io.Writer) io.Writer { return &watched{o: o, out: out} }

// Wrote reports whether anything was written through o's writers.
func (o *Output) Wrote() bool { return o.wrote.Load() }

type watched struct {
	o   *Output
	out io.Writer
}

func (w *watched) Write(p []byte) (int, error) {
	if len(p) > 0 {
		w.o.wrote.Store(true)
	}
	return w.out.Write(p)
}
