package cli

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/mandatevm/mandate/kernel"
)

// A run record is runs/<id>.json under the state directory: the run's
// metadata and the kernel's capability graph at the end of the run, in the
// JSON form `mandate graph --format json` prints. The file "last" holds the
// id of the most recent run. Both are written atomically (temporary file,
// fsync, rename), so a reader sees a whole record or none.

// recordVersion is the format of a run record.
const recordVersion = 1

// maxRecordSize bounds a run record read back.
const maxRecordSize = 256 << 20

// Record is a run record. The graph's fields (tasks, caps) sit at the top
// level next to run.
type Record struct {
	Version int     `json:"version"`
	Run     RunInfo `json:"run"`
	kernel.Graph
}

// RunInfo describes one run.
type RunInfo struct {
	ID        string    `json:"id"`
	Manifest  string    `json:"manifest"`
	Task      string    `json:"task"`
	Module    string    `json:"module"` // path of the .wasm file or guest directory
	Digest    string    `json:"digest"`
	Principal string    `json:"principal"`
	Engine    string    `json:"engine"`
	Started   time.Time `json:"started"`
	Ended     time.Time `json:"ended"`
	Exit      int       `json:"exit"`
	State     string    `json:"state"`
	Error     string    `json:"error,omitempty"`
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

// newRunID returns a time-sortable, unique run id, e.g.
// 20261129T153000Z-ab12cd.
func newRunID(t time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return t.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

var runIDRE = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z._-]{0,127}$`)

func validRunID(id string) bool {
	return runIDRE.MatchString(id) && !strings.Contains(id, "..")
}

// writeRecord stores r under dir and makes it the last run.
func writeRecord(dir string, r *Record) (string, error) {
	runs := filepath.Join(dir, "runs")
	if err := os.MkdirAll(runs, 0o700); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(runs, r.Run.ID+".json")
	if err := writeFileAtomic(path, append(b, '\n'), 0o600); err != nil {
		return "", err
	}
	if err := writeFileAtomic(filepath.Join(dir, "last"), []byte(r.Run.ID+"\n"), 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// writeFileAtomic writes data to a temporary file next to path, syncs it
// and renames it into place, then syncs the directory (best effort).
func writeFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err = f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err = f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// errNoRuns is returned by readRecord when nothing was recorded yet.
var errNoRuns = errors.New("no runs recorded yet")

// readRecord reads the record of run id, or of the last run when id is
// empty. Every failure is a readable error naming the file.
func readRecord(dir, id string) (*Record, string, error) {
	if id == "" {
		last := filepath.Join(dir, "last")
		b, err := os.ReadFile(last)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", fmt.Errorf("%w in %s", errNoRuns, dir)
		}
		if err != nil {
			return nil, "", err
		}
		id = strings.TrimSpace(string(b))
		if !validRunID(id) {
			return nil, "", fmt.Errorf("%s is corrupted: %q is not a run id", last, truncate(id, 64))
		}
	} else if !validRunID(id) {
		return nil, "", fmt.Errorf("%q is not a run id (run ids look like 20261129T153000Z-ab12cd)", truncate(id, 64))
	}
	path := filepath.Join(dir, "runs", id+".json")
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, path, fmt.Errorf("no run %s recorded in %s", id, dir)
	}
	if err != nil {
		return nil, path, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxRecordSize+1))
	if err != nil {
		return nil, path, err
	}
	if len(b) > maxRecordSize {
		return nil, path, fmt.Errorf("run record %s is larger than %d bytes", path, maxRecordSize)
	}
	r, err := decodeRecord(b)
	if err != nil {
		return nil, path, fmt.Errorf("run record %s is corrupted: %v", path, err)
	}
	if r.Run.ID != id {
		return nil, path, fmt.Errorf("run record %s is corrupted: it records run %q", path, truncate(r.Run.ID, 64))
	}
	return r, path, nil
}

// decodeRecord parses and checks a record.
func decodeRecord(b []byte) (*Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	if r.Version != recordVersion {
		return nil, fmt.Errorf("unknown record version %d (want %d)", r.Version, recordVersion)
	}
	if r.Tasks == nil || r.Caps == nil {
		return nil, errors.New("missing tasks or caps")
	}
	for i, t := range r.Tasks {
		if t.ID == "" {
			return nil, fmt.Errorf("task %d has no id", i)
		}
	}
	for i, c := range r.Caps {
		if c.ID == "" {
			return nil, fmt.Errorf("cap %d has no id", i)
		}
	}
	return &r, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// listRuns returns the ids of the recorded runs, newest first.
func listRuns(dir string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(dir, "runs"))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && validRunID(id) {
			ids = append(ids, id)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(ids)))
	return ids, nil
}
