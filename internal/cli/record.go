package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/runstore"
)

// Runs are recorded in the run store (package runstore, STATE/runs.db).

// Record is a stored run: its metadata, graph, denials and flows.
type Record = runstore.Record

// RunInfo describes one run.
type RunInfo = runstore.Run

// stateDirFlag registers --state-dir and its short form --state on fs.
func stateDirFlag(fs *flag.FlagSet) *string {
	p := fs.String("state-dir", "", "")
	fs.StringVar(p, "state", "", "")
	return p
}

// openStore opens the run store of state directory dir, to record a run.
func openStore(dir string) (*runstore.Store, error) {
	return runstore.Open(dir)
}

// readStore opens the run store of state directory dir to read it: read
// only, so a state directory that cannot be written can be inspected. Only
// a directory holding run records of the earlier JSON format and no store
// yet is opened for writing, to import them.
func readStore(dir string) (*runstore.Store, error) {
	if _, err := os.Stat(filepath.Join(dir, runstore.FileName)); errors.Is(err, fs.ErrNotExist) && !nothingRecorded(dir) {
		return runstore.Open(dir)
	}
	return runstore.OpenReadOnly(dir)
}

// readRecord reads the record of run id, or of the last run when id is
// empty or "last".
func readRecord(ctx context.Context, dir, id string) (*Record, error) {
	if id == "last" {
		id = "" // as "mandate logs last" and "mandate ui last" say it
	}
	if nothingRecorded(dir) {
		return nil, fmt.Errorf("%w in %s", runstore.ErrNoRuns, dir)
	}
	s, err := readStore(dir)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.Get(ctx, id)
}

// nothingRecorded reports whether state directory dir has no run store and
// no run records of the earlier JSON format (which opening the store
// imports): reading it need not create a store. Any other problem with the
// store's file is left for opening it to report.
func nothingRecorded(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, runstore.FileName)); !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	legacy, _ := filepath.Glob(filepath.Join(dir, "runs", "*.json"))
	return len(legacy) == 0
}

// stateDir returns where runs are recorded: flag, else $MANDATE_STATE_DIR,
// else $XDG_STATE_HOME/mandate, else ~/.local/state/mandate.
func (e *env) stateDir(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if d := e.getenv("MANDATE_STATE_DIR"); d != "" {
		return d, nil
	}
	if d := e.getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "mandate"), nil
	}
	home := e.getenv("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("no state directory: set --state-dir or MANDATE_STATE_DIR (%v)", err)
		}
	}
	return filepath.Join(home, ".local", "state", "mandate"), nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// newRunID returns a time-sortable, unique run id (host.NewRunID).
func newRunID(t time.Time) string { return host.NewRunID(t) }
