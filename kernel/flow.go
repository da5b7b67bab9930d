package kernel

import (
	"strings"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Flow control (laws 6 and 7). A task's label floats up as it reads; its
// clearance is the highest label it may ever hold; every sink has a
// clearance that everything sent to it must flow to.

func taintErr(what string, l kindapi.Label, where string) error {
	return kindapi.Errorf(abi.EFLOW, "%s is tainted by {%s}; %s accepts no untrusted data", what, strings.Join(l.Integ(), ","), where)
}

// refusedTaintErr names the taint a sink's refused taints matched.
func refusedTaintErr(what, taint string, to *kindapi.Sink, where string) error {
	return kindapi.Errorf(abi.EFLOW, "%s is tainted by %s; %s refuses taints %s", what, taint, where, to.RefusedTaints)
}

// Clearance returns the task's clearance and whether it is bounded: a root
// task without one in its manifest may hold anything; a child's is never
// above its parent's.
func (t *Task) Clearance() (kindapi.Label, bool) {
	if t.clearance == nil {
		return kindapi.Label{}, false
	}
	return *t.clearance, true
}

// flowErr describes a refused flow, naming the tags that blocked it.
func flowErr(what string, l, to kindapi.Label, where string) error {
	var blocked []string
	for _, tag := range l.Conf() {
		if !kindapi.NewLabel([]string{tag}, nil).CanFlowTo(to) {
			blocked = append(blocked, tag)
		}
	}
	return kindapi.Errorf(abi.EFLOW, "%s labelled {%s} may not flow to %s (cleared for {%s})",
		what, strings.Join(blocked, ","), where, strings.Join(to.Conf(), ","))
}

// mayHold checks that a blob labelled l may enter the task's table: it
// must flow to the task's clearance. A task cleared without pii:alice can
// never hold the passport, not even unread.
func (t *Task) mayHold(l kindapi.Label) error {
	c, bounded := t.Clearance()
	if !bounded || l.CanFlowTo(c) {
		return nil
	}
	return flowErr("data", l, c, "task "+t.id)
}

// hold inserts b into the task's table if its label may enter it.
func (t *Task) hold(b *kindapi.Blob) (abi.Handle, error) {
	if err := t.mayHold(b.Label()); err != nil {
		return 0, err
	}
	return t.table.InsertBlob(b)
}

// checkFlow checks that data labelled l may reach the sink of c: its
// confidentiality within the clearance, and no integrity taint the sink
// refuses (any, or one its refused taints match; the error names it). The
// data is described as what+id in the error (kept apart so an allowed
// call builds no string).
func checkFlow(what, id string, l kindapi.Label, to *kindapi.Sink, c *Cap) error {
	if !l.CanFlowTo(to.Clearance) {
		return flowErr(what+id, l, to.Clearance, c.kind.Name()+" "+c.displayName())
	}
	if taint, refused := to.RefusedTaint(l); refused {
		if to.RefusesTainted {
			return taintErr(what+id, l, c.kind.Name()+" "+c.displayName())
		}
		return refusedTaintErr(what+id, taint, to, c.kind.Name()+" "+c.displayName())
	}
	return nil
}

// Observe raises t's label by l: what the host showed on t's behalf (a
// tool's result returned to the client a session stands for). EFLOW, and
// no change, when l is above t's clearance: the host must then not show
// it.
func (t *Task) Observe(l kindapi.Label) error {
	if err := t.mayHold(l); err != nil {
		return err
	}
	t.raise(l)
	return nil
}

// CanHold reports, as EFLOW, whether data labelled l is above what t may
// hold (its clearance).
func (t *Task) CanHold(l kindapi.Label) error { return t.mayHold(l) }
