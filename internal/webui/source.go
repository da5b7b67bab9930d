package webui

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/runstore"
)

// RunSource is where a UI reads its runs instead of a state directory: a
// fleet's (mandate ui --nats), whose nodes copy each run's record. Such a
// UI is read-only: no approvals (a node asks no person), no MCP clients,
// no audit log of its own (the nodes' copies are checked by mandate audit
// verify --nats), and its list is read again every SourceRelist while a
// page is open rather than when a file changes.
type RunSource interface {
	// Name says where the runs are, for the pages ("the fleet on
	// nats://127.0.0.1:4222"), without credentials.
	Name() string
	// List returns the runs, newest first.
	List(ctx context.Context) ([]SourceRun, error)
	// Get returns the record of run id, with its outputs; id "" is the
	// last run that ran. An unknown run is an error wrapping
	// runstore.ErrNotFound, one whose record cannot be had (yet) one
	// wrapping ErrNoRecord.
	Get(ctx context.Context, id string) (*runstore.Record, error)
}

// SourceRun is one run of a RunSource's list.
type SourceRun struct {
	runstore.Summary
	// Caps are the run's capabilities when known (GrantsSummary picks the
	// roots); nil when the record is not there (yet).
	Caps []kernel.GraphCap
	// Node ran it; Submission is its id in the fleet.
	Node, Submission string
}

// ErrNoRecord says a run is known but its record is not there (yet): a
// fleet run still running, or lost with its node.
var ErrNoRecord = errors.New("no record of the run")

// SourceRelist is how often a RunSource's list is read again while an
// event stream is open.
const SourceRelist = 5 * time.Second

// errNoStateDir is what the state directory's stores say when the runs
// come from a RunSource: they do not exist.
var errNoStateDir = fmt.Errorf("%w: the runs are a fleet's, with no state directory", fs.ErrNotExist)
