package kernel

import (
	"strings"

	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// Flow control (laws 6 and 7). A task's label floats up as it reads; its
// clearance is the highest label it may ever hold; every sink has a
// clearance that everything sent to it must flow to.

// Sink is implemented by the scope of a capability that sends data out (a
// network origin, a payment provider). Every use requires the calling
// task's label, and every blob spliced into the request, to flow to the
// sink's clearance; otherwise the call is EFLOW and nothing is sent.
type Sink interface {
	// SinkClearance returns the sink's clearance, and false when this
	// particular scope sends nothing out.
	SinkClearance() (Label, bool)
}

// TrustedSink is a sink that may refuse senders tainted by untrusted
// sources (a network capability with accepts_untrusted = false): a task
// whose label carries any integrity taint, or a spliced blob that does,
// may not send to it.
type TrustedSink interface {
	RefusesTainted() bool
}

func refusesTainted(s Scope) bool {
	ts, ok := s.(TrustedSink)
	return ok && ts.RefusesTainted()
}

func taintErr(what string, l Label, where string) error {
	return Errorf(abi.EFLOW, "%s is tainted by {%s}; %s accepts no untrusted data", what, strings.Join(l.Integ(), ","), where)
}

// Declassifier is implemented by the one kind allowed to lower labels
// (caps/declassify). For its results the kernel uses the label the kind
// computes as it is, instead of joining the caller's label into it, and it
// audits every use, whatever the manifest says. It is the only way down.
type Declassifier interface {
	Declassifies()
}

// Clearance returns the task's clearance and whether it is bounded: a root
// task without one in its manifest may hold anything; a child's is never
// above its parent's.
func (t *Task) Clearance() (Label, bool) {
	if t.clearance == nil {
		return Label{}, false
	}
	return *t.clearance, true
}

// flowErr describes a refused flow, naming the tags that blocked it.
func flowErr(what string, l, to Label, where string) error {
	var blocked []string
	for _, tag := range l.Conf() {
		if !(Label{conf: tag}).CanFlowTo(to) {
			blocked = append(blocked, tag)
		}
	}
	return Errorf(abi.EFLOW, "%s labelled {%s} may not flow to %s (cleared for {%s})",
		what, strings.Join(blocked, ","), where, strings.Join(to.Conf(), ","))
}

// mayHold checks that a blob labelled l may enter the task's table: it
// must flow to the task's clearance. A task cleared without pii:alice can
// never hold the passport, not even unread.
func (t *Task) mayHold(l Label) error {
	c, bounded := t.Clearance()
	if !bounded || l.CanFlowTo(c) {
		return nil
	}
	return flowErr("data", l, c, "task "+t.id)
}

// hold inserts b into the task's table if its label may enter it.
func (t *Task) hold(b *Blob) (abi.Handle, error) {
	if err := t.mayHold(b.label); err != nil {
		return 0, err
	}
	return t.table.InsertBlob(b)
}

// checkSink checks that the task's label may flow to the sink c is, before
// the kind acts.
func (t *Task) checkSink(c *Cap) error {
	to, ok := sinkClearance(c)
	if !ok {
		return nil
	}
	return checkFlow("task ", t.id, t.Label(), to, c)
}

// checkSpliced checks a blob a kind splices into a request to sink c.
func checkSpliced(c *Cap, b *Blob) error {
	to, ok := sinkClearance(c)
	if !ok {
		return nil
	}
	return checkFlow("a spliced blob", "", b.label, to, c)
}

// sinkClearance returns the clearance of the sink c is; ok is false when c
// is not a sink (it takes anything).
func sinkClearance(c *Cap) (to Label, ok bool) {
	if c == nil {
		return Label{}, false
	}
	s, ok := c.scope.(Sink)
	if !ok {
		return Label{}, false
	}
	return s.SinkClearance()
}

// checkFlow checks that data labelled l may reach sink c of clearance to:
// its confidentiality within the clearance, and no integrity taint where
// the sink refuses it. The data is described as what+id in the error (kept
// apart so an allowed call builds no string).
func checkFlow(what, id string, l, to Label, c *Cap) error {
	if !l.CanFlowTo(to) {
		return flowErr(what+id, l, to, c.kind.Name()+" "+c.displayName())
	}
	if len(l.Integ()) > 0 && refusesTainted(c.scope) {
		return taintErr(what+id, l, c.kind.Name()+" "+c.displayName())
	}
	return nil
}
