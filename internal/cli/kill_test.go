package cli

import (
	"context"
	"errors"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/runstore"
)

// TestKillAtRandomMoments SIGKILLs `mandate run` 50 times on one state
// directory, each time after a random delay spread from ~0 to past the
// run's normal end: before the audit log or the run store is opened,
// while the run begins, while its task makes audited fetches, while its
// end is recorded, after it exited. After each kill, every run in the
// store is in a final state (never "running"; a crashed run has no end
// time), no recorded run changed, the audit log opens and verifies, and
// every audit entry belongs to a recorded run. After all of them, a
// normal run succeeds and "mandate graph" with no run shows it.
//
// MANDATE_KILL_SEED=N replays the guests and delays of a seed the log
// printed (the moments they hit vary with the machine's speed).
func TestKillAtRandomMoments(t *testing.T) {
	if testing.Short() || runtime.GOOS == "windows" {
		t.Skip("builds mandate and kills it 50 times")
	}
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	bin := buildMandate(t)
	dir := t.TempDir()
	loop := auditedManifest(t, dir, "loop", "cli-loop")
	fetch := auditedManifest(t, dir, "fetch", "cli-guest")
	input := filepath.Join(dir, "fetch.in")
	cache := filepath.Join(os.TempDir(), "mandate-crash-test-cache")
	command := func(state, manifest string) *exec.Cmd {
		return exec.Command(bin, "run", manifest, "--var", "origin="+srv.URL, "--input", input,
			"--engine", testengine.Name(), "--state-dir", state, "--cache-dir", cache, "--log-level", "off")
	}

	// Warm the cache (the guests built, the modules compiled) in a state
	// directory of its own, and time a whole run of the fetch guest: the
	// kills are spread over that.
	warm := filepath.Join(dir, "warm")
	var normal time.Duration
	for i := 0; i < 2; i++ {
		for _, m := range []string{fetch, loop} {
			cmd := command(warm, m)
			start := time.Now()
			if m == loop {
				// The loop guest never ends: warm it up to its first fetch.
				before := requests.Load()
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				for requests.Load() == before && time.Since(start) < time.Minute {
					time.Sleep(time.Millisecond)
				}
				cmd.Process.Kill()
				cmd.Wait()
				if requests.Load() == before {
					t.Fatal("the loop guest made no request in a minute")
				}
				continue
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("a run of the fetch guest: %v\n%s", err, out)
			}
			normal = time.Since(start)
		}
	}
	// On a loaded machine, kills stay within about a minute in all (they
	// then fall before the run's end more often).
	normal = min(normal, time.Second)

	seed := time.Now().UnixNano()
	if s := os.Getenv("MANDATE_KILL_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("MANDATE_KILL_SEED: %v", err)
		}
	}
	t.Logf("seed %d (replay with MANDATE_KILL_SEED=%d); kills spread over %v, about a whole run of the fetch guest", seed, seed, normal)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))

	state := filepath.Join(dir, "state")
	seen := map[string]runstore.Run{} // every run recorded so far, as it was
	outcomes := map[string]int{}
	const kills = 50
	for i := 0; i < kills; i++ {
		manifest, guest := fetch, "fetch"
		if rng.IntN(2) == 0 {
			manifest, guest = loop, "loop"
		}
		// Uniform over [0, 1.3 × a whole run]; for half the fetch runs,
		// over [0.8, 1.2] × a whole run, where the run's end is recorded.
		lo, hi := time.Duration(0), normal*13/10
		if guest == "fetch" && rng.IntN(2) == 0 {
			lo, hi = normal*8/10, normal*12/10
		}
		delay := lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
		cmd := command(state, manifest)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		var exited string
		var ee *exec.ExitError
		switch {
		case err == nil:
			exited = "exited 0"
		case errors.As(err, &ee) && ee.ProcessState.Exited():
			// It ended on its own before the kill: it must have succeeded.
			t.Fatalf("kill %d (%s guest, after %v): the run exited %d before the kill:\n%s", i, guest, delay, ee.ExitCode(), &stderr)
		case errors.As(err, &ee):
			exited = "killed"
		default:
			t.Fatalf("kill %d: %v", i, err)
		}
		what := checkAfterKill(t, state, seen, i, guest, delay)
		outcomes[guest+": "+exited+", "+what]++
	}
	t.Logf("%d kills: %v", kills, outcomes)

	// One more run, not killed, succeeds and is the one graph shows.
	before := len(seen)
	if out, err := command(state, fetch).CombinedOutput(); err != nil {
		t.Fatalf("the run after %d kills: %v\n%s", kills, err, out)
	}
	store, err := openStore(state)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := store.List(context.Background())
	store.Close()
	if err != nil || len(runs) != before+1 {
		t.Fatalf("after the last run: %d runs (%v), want %d", len(runs), err, before+1)
	}
	last := runs[0]
	if _, old := seen[last.ID]; old || last.State != string(kernel.TaskDone) || last.Exit != 0 || last.Ended.IsZero() {
		t.Fatalf("the last run: %+v", last.Run)
	}
	out, err := exec.Command(bin, "graph", "--state-dir", state).CombinedOutput()
	if err != nil {
		t.Fatalf("mandate graph: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "run "+last.ID+": "+fetch) {
		t.Errorf("mandate graph does not show the last run, %s:\n%s", last.ID, out)
	}
}

// finalStates are the states a run may be read in once its process is
// gone.
var finalStates = map[string]bool{
	runstore.StateCrashed: true, runstore.StateRefused: true,
	string(kernel.TaskDone): true, string(kernel.TaskFailed): true, string(kernel.TaskKilled): true,
	string(kernel.TaskTimedOut): true, string(kernel.TaskOutOfMemory): true,
}

// checkAfterKill checks state after the process of kill i is gone, with
// seen the runs recorded until then (updated), and says what the kill
// left: no new run, or the new run's state.
func checkAfterKill(t *testing.T, state string, seen map[string]runstore.Run, i int, guest string, delay time.Duration) string {
	t.Helper()
	ctx := context.Background()
	at := func() string {
		return "kill " + strconv.Itoa(i) + " (" + guest + " guest, after " + delay.String() + ")"
	}
	what := "no run recorded"
	ids := map[string]bool{}
	if _, err := os.Stat(filepath.Join(state, runstore.FileName)); err == nil {
		store, err := openStore(state)
		if err != nil {
			t.Fatalf("%s: the run store does not open: %v", at(), err)
		}
		runs, err := store.List(ctx)
		store.Close()
		if err != nil {
			t.Fatalf("%s: the run store does not list: %v", at(), err)
		}
		if len(runs) > len(seen)+1 {
			t.Fatalf("%s: %d runs, %d before", at(), len(runs), len(seen))
		}
		for _, r := range runs {
			ids[r.ID] = true
			if !finalStates[r.State] {
				t.Fatalf("%s: run %s reads %q with its process gone: %+v", at(), r.ID, r.State, r.Run)
			}
			if (r.State == runstore.StateCrashed) != r.Ended.IsZero() {
				t.Fatalf("%s: run %s is %q with end time %v", at(), r.ID, r.State, r.Ended)
			}
			old, ok := seen[r.ID]
			if !ok {
				what = r.State
				seen[r.ID] = r.Run
				continue
			}
			if old != r.Run {
				t.Fatalf("%s: run %s changed after its process was gone:\nwas %+v\nnow %+v", at(), r.ID, old, r.Run)
			}
		}
		if len(runs) < len(seen) {
			t.Fatalf("%s: %d runs, %d before", at(), len(runs), len(seen))
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	} else if len(seen) > 0 {
		t.Fatalf("%s: the run store is gone", at())
	}
	if _, err := os.Stat(auditPath(state)); errors.Is(err, fs.ErrNotExist) {
		if len(seen) > 0 {
			t.Fatalf("%s: the audit log is gone", at())
		}
		return what
	}
	log, err := audit.Open(auditPath(state))
	if err != nil {
		t.Fatalf("%s: the audit log does not open: %v", at(), err)
	}
	defer log.Close()
	if _, err := log.Verify(ctx); err != nil {
		t.Fatalf("%s: the audit log does not verify: %v", at(), err)
	}
	entries, err := log.Entries(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !ids[e.Run] {
			t.Fatalf("%s: audit entry %d is of run %q, which the run store does not have", at(), e.Seq, e.Run)
		}
	}
	return what
}
