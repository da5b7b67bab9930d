package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mandatevm/mandate/runstore"
	"github.com/nats-io/nats.go/jetstream"
)

// Run records. When a run ends, its node copies the run's record (its
// graph of tasks and capabilities, denials, flows, approvals, effects and
// outputs: runstore.Record, as "mandate graph --format json" shows it) to
// MANDATE_AUDIT beside its audit log's copy:
//
//	mandate.audit.<node>.record.<run id>
//
// so that "mandate graph --nats" and "mandate ui --nats" show a fleet's
// runs without reaching the nodes' disks. Only the node's own user may
// publish under mandate.audit.<node> (NodePermissions): a record names the
// node that wrote it. It is the node's account of the run, as its run
// store holds it; the audit log's copy is what a signature covers.
const subjectRecord = ".record."

// MaxRecordCopy bounds a record's copy: a larger one is copied without
// its outputs (the run state carries the result), and one larger still
// is not copied at all (logged; the node's run store has it whole).
const MaxRecordCopy = 512 << 10

// recordCopyWait bounds copying a record.
const recordCopyWait = 15 * time.Second

// ErrNoRecord is returned by Record for a run whose node copied no record
// (the run did not end on it, its node was cut off, or the record was too
// large).
var ErrNoRecord = errors.New("fleet: no copy of the run's record")

// copyRecord copies the record of run runID, from this node's run store,
// to the fleet, before the run's end is written (so a run whose state
// says it ended has its record there, unless copying failed); a failure
// is logged, and bounded to recordCopyWait: the run's end waits for it.
func (n *Node) copyRecord(ctx context.Context, runID string) {
	if runID == "" || n.fenced.Load() || !n.Fleet.JS.Conn().IsConnected() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, recordCopyWait)
	defer cancel()
	if err := copyRecord(ctx, n.Fleet, n.Host.Store(), n.Name, runID); err != nil {
		n.Logger.Warn("copying a run's record to the fleet", "run", runID, "error", err)
	}
}

// recordCopy is a record as it travels: with its outputs, which a
// record's own JSON leaves out.
type recordCopy struct {
	*runstore.Record
	Outputs []runstore.Output `json:"outputs,omitempty"`
}

func copyRecord(ctx context.Context, f *Fleet, st *runstore.Store, node, runID string) error {
	if !validToken(runID) {
		return fmt.Errorf("run id %q cannot be a subject's token: not copied", runID)
	}
	rec, err := st.Get(ctx, runID)
	if err != nil {
		return err
	}
	c := recordCopy{Record: rec}
	if c.Outputs, err = st.Outputs(ctx, runID, ""); err != nil {
		return err
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if len(b) > MaxRecordCopy {
		c.Outputs = nil
		if b, err = json.Marshal(c); err != nil {
			return err
		}
	}
	if len(b) > MaxRecordCopy {
		return fmt.Errorf("the record is %d bytes, more than %d: not copied", len(b), MaxRecordCopy)
	}
	_, err = f.JS.Publish(ctx, subjectAudit+node+subjectRecord+runID, b,
		jetstream.WithMsgID(node+"/record/"+runID))
	return err
}

// Record returns the record of run runID that node copied to the fleet;
// an error wrapping ErrNoRecord when it copied none.
func (f *Fleet) Record(ctx context.Context, node, runID string) (*runstore.Record, error) {
	if !runstore.ValidRunID(runID) || !validToken(runID) || !validToken(node) {
		return nil, fmt.Errorf("%w: run %q of node %q", ErrNoRecord, runID, node)
	}
	m, err := f.Audit.GetLastMsgForSubject(ctx, subjectAudit+node+subjectRecord+runID)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("%w: node %s copied none of run %s", ErrNoRecord, node, runID)
	}
	if err != nil {
		return nil, fmt.Errorf("fleet: the record of run %s: %w", runID, err)
	}
	c := recordCopy{Record: &runstore.Record{}}
	if err := json.Unmarshal(m.Data, &c); err != nil {
		return nil, fmt.Errorf("fleet: node %s's record of run %s does not decode: %v", node, runID, err)
	}
	if c.Record.Run.ID != runID {
		return nil, fmt.Errorf("fleet: node %s's record under run %s is of run %q", node, runID, c.Record.Run.ID)
	}
	c.Record.Outputs = c.Outputs
	return c.Record, nil
}

// validToken reports whether s can be one token of a subject.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r == '.' || r == '*' || r == '>' || r == 0x7f {
			return false
		}
	}
	return true
}
