package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/mandatevm/mandate/fleet"
	"github.com/mandatevm/mandate/internal/webui"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/runstore"
)

// fleetRuns reads a fleet's runs for "mandate graph --nats" and "mandate
// ui --nats": the submissions' states (MANDATE_RUN_STATE) and the records
// their nodes copied when the runs ended (fleet.Fleet.Record). A run is
// named by its id in its node's records (what "mandate run --nats" and
// "mandate runs --nats" print), by its submission's id, or "last".
type fleetRuns struct {
	f    *fleet.Fleet
	name string // the URLs, passwords hidden

	mu      sync.Mutex                  // guards records
	records map[string]*runstore.Record // ended runs' records by run id: they no longer change
}

var _ webui.RunSource = (*fleetRuns)(nil)

func newFleetRuns(f *fleet.Fleet, urls string) *fleetRuns {
	return &fleetRuns{f: f, name: "the fleet on " + redactURLs(urls), records: map[string]*runstore.Record{}}
}

// Name implements webui.RunSource.
func (fr *fleetRuns) Name() string { return fr.name }

// maxFleetRecords bounds the records a list reads: older runs are listed
// from their states alone.
const maxFleetRecords = 500

// states returns the submissions, newest first.
func (fr *fleetRuns) states(ctx context.Context) ([]fleet.RunState, error) {
	states, err := fr.f.AllStates(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading %s's run states: %w", fr.name, err)
	}
	sort.SliceStable(states, func(i, j int) bool { return states[i].Submitted.After(states[j].Submitted) })
	return states, nil
}

// find returns the state of the run named id: a run id, a submission id,
// or "" or "last" for the last submission that ran (one a node started,
// not one refused before its task ran or still queued).
func (fr *fleetRuns) find(ctx context.Context, id string) (fleet.RunState, error) {
	states, err := fr.states(ctx)
	if err != nil {
		return fleet.RunState{}, err
	}
	if id == "" || id == "last" {
		for _, st := range states {
			if st.RunID != "" && st.State != fleet.StateRefused {
				return st, nil
			}
		}
		if len(states) == 0 {
			return fleet.RunState{}, fmt.Errorf("%w in %s", runstore.ErrNoRuns, fr.name)
		}
		return fleet.RunState{}, fmt.Errorf("%w: no run of %s has started on a node yet (mandate runs --nats lists the submissions)", runstore.ErrNotFound, fr.name)
	}
	for _, st := range states {
		if st.RunID == id || st.ID == id {
			return st, nil
		}
	}
	return fleet.RunState{}, fmt.Errorf("%w: no run or submission %s in %s (mandate runs --nats lists them)", runstore.ErrNotFound,
		kindapi.Printable(truncate(id, 64)), fr.name)
}

// record returns the record st's node copied, or says why there is none.
func (fr *fleetRuns) record(ctx context.Context, st fleet.RunState) (*runstore.Record, error) {
	if st.RunID == "" {
		switch st.State {
		case fleet.StateQueued:
			return nil, fmt.Errorf("%w: submission %s is queued: no node has taken it yet", webui.ErrNoRecord, st.ID)
		case fleet.StateRunning:
			return nil, fmt.Errorf("%w: submission %s is starting on node %s", webui.ErrNoRecord, st.ID, kindapi.Printable(st.Node))
		}
		return nil, fmt.Errorf("%w: submission %s was %s before a run started: %s", webui.ErrNoRecord, st.ID, st.State,
			kindapi.EscapeText(oneLine(st.Error)))
	}
	fr.mu.Lock()
	rec, ok := fr.records[st.RunID]
	fr.mu.Unlock()
	if ok {
		return rec, nil
	}
	rec, err := fr.f.Record(ctx, st.Node, st.RunID)
	switch {
	case errors.Is(err, fleet.ErrNoRecord) && st.State == fleet.StateRunning:
		return nil, fmt.Errorf("%w: run %s is still running on node %s: its node copies its record to the fleet when it ends "+
			"(until then: mandate graph %s --state-dir on that node)", webui.ErrNoRecord, st.RunID, kindapi.Printable(st.Node), st.RunID)
	case errors.Is(err, fleet.ErrNoRecord) && st.State == fleet.StateLost:
		return nil, fmt.Errorf("%w: run %s was lost with node %s, which copied no record of it: what it recorded is in that node's "+
			"state directory (mandate graph %s --state-dir there), its audit entries in the node's copy (mandate audit verify --nats)",
			webui.ErrNoRecord, st.RunID, kindapi.Printable(st.Node), st.RunID)
	case errors.Is(err, fleet.ErrNoRecord):
		return nil, fmt.Errorf("%w: node %s copied no record of run %s (a node of an earlier Mandate, or a copy that failed: "+
			"see the node's log); on that node: mandate graph %s --state-dir DIR", webui.ErrNoRecord, kindapi.Printable(st.Node), st.RunID, st.RunID)
	case err != nil:
		return nil, err
	}
	if st.Final() {
		fr.mu.Lock()
		fr.records[st.RunID] = rec
		fr.mu.Unlock()
	}
	return rec, nil
}

// Get implements webui.RunSource.
func (fr *fleetRuns) Get(ctx context.Context, id string) (*runstore.Record, error) {
	st, err := fr.find(ctx, id)
	if err != nil {
		return nil, err
	}
	return fr.record(ctx, st)
}

// List implements webui.RunSource: the submissions a node started a run
// for, newest first; each with its record's summary when its node copied
// one, else with what its state says.
func (fr *fleetRuns) List(ctx context.Context) ([]webui.SourceRun, error) {
	states, err := fr.states(ctx)
	if err != nil {
		return nil, err
	}
	var out []webui.SourceRun
	for _, st := range states {
		if st.RunID == "" {
			continue // queued, or refused before a run started: mandate runs --nats lists it
		}
		r := webui.SourceRun{Node: st.Node, Submission: st.ID}
		var rec *runstore.Record
		if st.State != fleet.StateRunning && len(out) < maxFleetRecords {
			rec, _ = fr.record(ctx, st) // none: listed from its state
		}
		if rec != nil {
			r.Summary = runstore.Summary{Run: rec.Run, Tasks: len(rec.Tasks), Caps: len(rec.Caps)}
			for _, t := range rec.Tasks {
				r.Denials += t.Denials
			}
			r.Caps = rec.Caps
		} else {
			r.Summary = runstore.Summary{Run: runstore.Run{ID: st.RunID, State: st.State, Started: st.Started, Ended: st.Ended,
				Exit: st.Exit, Error: st.Error}}
			if r.Started.IsZero() {
				r.Started = st.Submitted
			}
		}
		out = append(out, r)
	}
	return out, nil
}
