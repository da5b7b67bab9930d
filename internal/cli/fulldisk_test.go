//go:build linux

package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/runstore"
)

// TestFullDiskRefusesTheRun: on a filesystem with no space left, `mandate
// run` does not start (exit 2, nothing reaches the server), says which
// file could not be written and why, and leaves nothing half-written:
// once space is freed, the audit log verifies with the entries it had,
// the run store has the runs it had (and at most refused ones), and a run
// succeeds. Both with the state directory's files closed, and with them
// open in another process (as in a run still going on when the disk
// filled: their -wal and -shm files are there, and opening them needs no
// space).
func TestFullDiskRefusesTheRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mandate and runs it on a small tmpfs")
	}
	d := newDiskRuns(t)
	for _, heldOpen := range []bool{false, true} {
		name := "files closed"
		if heldOpen {
			name = "files open elsewhere"
		}
		t.Run(name, func(t *testing.T) {
			mnt := smallFS(t, "1m")
			state := filepath.Join(mnt, "state")
			if code, stderr := d.run(t, state); code != 0 {
				t.Fatalf("the run before the disk filled: exit %d: %s", code, stderr)
			}
			runsBefore := listRuns(t, state)
			entriesBefore := verifyLog(t, state)
			var closeAll func()
			if heldOpen {
				l, err := audit.Open(auditPath(state))
				if err != nil {
					t.Fatal(err)
				}
				s, err := openStore(state)
				if err != nil {
					t.Fatal(err)
				}
				closeAll = func() { l.Close(); s.Close() }
				defer closeAll()
			}

			filler := fillFS(t, mnt)
			sent := d.requests.Load()
			code, stderr := d.run(t, state)
			t.Logf("a run on a full disk: exit %d, stderr:\n%s", code, stderr)
			if code != exitUsage {
				t.Errorf("a run on a full disk exited %d, want %d", code, exitUsage)
			}
			if !strings.Contains(stderr, auditPath(state)) && !strings.Contains(stderr, filepath.Join(state, runstore.FileName)) {
				t.Errorf("the error names neither the audit log nor the run store")
			}
			if !mentionsFull(strings.ReplaceAll(stderr, mnt, "DIR")) {
				t.Errorf("the error does not say that the disk is full (no space left)")
			}
			if n := d.requests.Load() - sent; n != 0 {
				t.Errorf("the task ran on a full disk: %d requests reached the server", n)
			}

			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			if closeAll != nil {
				closeAll()
			}
			if n := verifyLog(t, state); n != entriesBefore {
				t.Errorf("the audit log has %d entries after the refused run, %d before", n, entriesBefore)
			}
			checkOnlyRefusedAdded(t, runsBefore, listRuns(t, state))
			if code, stderr := d.run(t, state); code != 0 {
				t.Fatalf("the run after space was freed: exit %d: %s", code, stderr)
			}
		})
	}
}

// TestFullDiskLittleLeft: with a little space left, from a few pages to nearly
// what a run needs, a run fails wherever it runs out (opening the audit
// log or the run store, their checks, the run's start, an audited call,
// the run's end), and whatever it did is sound once space is freed: the
// audit log verifies, with an allow entry for every request that reached
// the server (write-ahead); no run reads "running"; a run that exited 0
// is recorded done; and the next run succeeds.
func TestFullDiskLittleLeft(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mandate and runs it on a small tmpfs")
	}
	d := newDiskRuns(t)
	for left := int64(16 << 10); left <= 176<<10; left += 40 << 10 {
		mnt := smallFS(t, "1m")
		state := filepath.Join(mnt, "state")
		if code, stderr := d.run(t, state); code != 0 {
			t.Fatalf("the run before the disk filled: exit %d: %s", code, stderr)
		}
		runsBefore := listRuns(t, state)
		allowsBefore := fetchAllows(t, state)
		filler := fillFS(t, mnt)
		if err := os.Truncate(filler, max(fileSize(t, filler)-left, 0)); err != nil {
			t.Fatal(err)
		}
		sent := d.requests.Load()
		code, stderr := d.run(t, state)
		sent = d.requests.Load() - sent
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		verifyLog(t, state)
		if allows := fetchAllows(t, state) - allowsBefore; allows < sent {
			t.Errorf("%d KiB left: %d requests reached the server, %d were logged", left>>10, sent, allows)
		}
		old := map[string]bool{}
		for _, r := range runsBefore {
			old[r.ID] = true
		}
		outcome := "no run recorded"
		for _, r := range listRuns(t, state) {
			if old[r.ID] {
				continue
			}
			outcome = "the run reads " + r.State
			if !finalStates[r.State] || (r.State == runstore.StateCrashed) != r.Ended.IsZero() {
				t.Errorf("%d KiB left: the run reads %q with its process gone: %+v", left>>10, r.State, r.Run)
			}
			if code == 0 && r.State != "done" {
				t.Errorf("%d KiB left: the run exited 0 and reads %q", left>>10, r.State)
			}
		}
		if code == 0 && outcome == "no run recorded" {
			t.Errorf("%d KiB left: the run exited 0 and is not recorded", left>>10)
		}
		t.Logf("%d KiB left: exit %d, %d requests, %s; stderr:\n%s", left>>10, code, sent, outcome, strings.ReplaceAll(stderr, mnt, "DIR"))
		if code, stderr := d.run(t, state); code != 0 {
			t.Fatalf("%d KiB left: the run after space was freed: exit %d: %s", left>>10, code, stderr)
		}
	}
}

// diskRuns runs the built mandate on cli-guest "fetch" under an audited
// manifest against a loopback server.
type diskRuns struct {
	bin, manifest, input, origin string
	requests                     atomic.Int64
}

func newDiskRuns(t *testing.T) *diskRuns {
	t.Helper()
	d := &diskRuns{bin: buildMandate(t)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.requests.Add(1)
		w.Write([]byte("results"))
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	d.manifest, d.input, d.origin = auditedManifest(t, dir, "fetch", "cli-guest"), filepath.Join(dir, "fetch.in"), srv.URL
	return d
}

// run runs mandate on state and returns its exit code and stderr; a
// process that did not exit (a signal) fails the test.
func (d *diskRuns) run(t *testing.T, state string) (int, string) {
	t.Helper()
	cmd := exec.Command(d.bin, "run", d.manifest, "--var", "origin="+d.origin, "--input", d.input,
		"--engine", testengine.Name(), "--state-dir", state,
		"--cache-dir", filepath.Join(os.TempDir(), "mandate-crash-test-cache"), "--log-level", "error")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && (!errors.As(err, &ee) || !ee.Exited()) {
		t.Fatalf("mandate run: %v\n%s", err, &stderr)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// fetchAllows counts the allowed fetches in the audit log of state.
func fetchAllows(t *testing.T, state string) int64 {
	t.Helper()
	l, err := audit.Open(auditPath(state))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	es, err := l.Entries(context.Background(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range es {
		if e.Op == "call:fetch" && e.Decision == "allow" {
			n++
		}
	}
	return n
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestReadOnlyAuditLog: an audit.db that cannot be written, in a state
// directory that can, stops `mandate run` before it starts (exit 2, the
// file named) and records no run. Root ignores file modes, so as root the
// run is made by another user (uid 65534) who owns everything else.
func TestReadOnlyAuditLog(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a guest and runs it")
	}
	base, err := os.MkdirTemp("", "mandate-readonly-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	guest, err := filepath.Abs(filepath.Join("testdata", "guests", "cli-guest"))
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := host.BuildGuest(context.Background(), guest, false, filepath.Join(os.TempDir(), "mandate-concurrent-test-cache"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "hello.wasm"), wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(base, "ro.hcl")
	if err := os.WriteFile(manifest, []byte("task \"ro\" {\n  module    = \"hello.wasm\"\n  principal = \"alice\"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state, cache := filepath.Join(base, "state"), filepath.Join(base, "cache")
	for _, d := range []string{state, cache} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"run", manifest, "--engine", testengine.Name(), "--state-dir", state, "--cache-dir", cache, "--log-level", "off"}
	var run func() (int, string, string)
	const nobody = 65534
	if os.Geteuid() == 0 {
		bin := buildMandate(t)
		for _, p := range []string{filepath.Dir(bin), bin} {
			if err := os.Chmod(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, d := range []string{state, cache} {
			if err := os.Chown(d, nobody, nobody); err != nil {
				t.Fatal(err)
			}
		}
		run = func() (int, string, string) {
			cmd := exec.Command(bin, args...)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + base}
			cmd.Dir = base
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if err != nil && (!errors.As(err, &ee) || !ee.Exited()) {
				t.Fatalf("mandate run as uid %d: %v\n%s", nobody, err, &stderr)
			}
			return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
		}
	} else {
		run = func() (int, string, string) {
			var stdout, stderr bytes.Buffer
			code := Main(args, nil, &stdout, &stderr)
			return code, stdout.String(), stderr.String()
		}
	}
	// The same run, with everything writable, succeeds.
	if code, stdout, stderr := run(); code != 0 || !strings.Contains(stdout, "hello from a guest") {
		t.Fatalf("the run with a writable audit log: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	runsBefore := listRuns(t, state)
	db := auditPath(state)
	if os.Geteuid() == 0 {
		if err := os.Chown(db, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(db, 0o444); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(db, 0o644) })
	sum := fileHash(t, db)

	code, stdout, stderr := run()
	t.Logf("a run with a read-only %s: exit %d, stderr:\n%s", db, code, stderr)
	if code != exitUsage {
		t.Errorf("exit %d, want %d", code, exitUsage)
	}
	if !strings.Contains(stderr, db) {
		t.Errorf("the error does not name %s", db)
	}
	if strings.Contains(stdout, "hello from a guest") {
		t.Errorf("the task ran with an audit log that cannot be written")
	}
	if fileHash(t, db) != sum {
		t.Errorf("%s changed", db)
	}
	checkOnlyRefusedAdded(t, runsBefore, listRuns(t, state))
}

// smallFS mounts a tmpfs of size (a mount option, "1m") on a temporary
// directory until the test ends, or skips the test where mounting is not
// permitted.
func smallFS(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size="+size+",mode=0755"); err != nil {
		t.Skipf("cannot mount a %s tmpfs to fill (%v): the full-disk case needs a small filesystem, "+
			"and the audit log has no hook to make its writes fail instead", size, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmounting the tmpfs at %s: %v", dir, err)
		}
	})
	return dir
}

// fillFS writes a file in dir until the filesystem has no space left, and
// returns its path.
func fillFS(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for _, n := range []int{len(chunk), 1} { // the last bytes of the last block too
		for err == nil {
			_, err = f.Write(chunk[:n])
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("filling %s: %v, want ENOSPC", dir, err)
		}
		err = nil
	}
	return path
}

// mentionsFull reports whether an error message says that a file could
// not be written for lack of space (SQLite's "database or disk is full",
// the system's "no space left on device").
func mentionsFull(msg string) bool {
	msg = strings.ToLower(msg)
	for _, s := range []string{"full", "no space"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func listRuns(t *testing.T, state string) []runstore.Summary {
	t.Helper()
	s, err := openStore(state)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runs, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

// verifyLog verifies the audit log of state and returns its entry count.
func verifyLog(t *testing.T, state string) int64 {
	t.Helper()
	l, err := audit.Open(auditPath(state))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rep, err := l.Verify(context.Background())
	if err != nil {
		t.Fatalf("the audit log does not verify: %v", err)
	}
	return rep.Entries
}

// checkOnlyRefusedAdded checks that the runs after are those before,
// unchanged, and at most runs that were refused (recorded, nothing ran).
func checkOnlyRefusedAdded(t *testing.T, before, after []runstore.Summary) {
	t.Helper()
	old := map[string]runstore.Run{}
	for _, r := range before {
		old[r.ID] = r.Run
	}
	for _, r := range after {
		was, ok := old[r.ID]
		switch {
		case !ok && r.State == runstore.StateRefused:
			t.Logf("a refused run was recorded: %+v", r.Run)
		case !ok:
			t.Errorf("a run was recorded that is not refused: %+v", r.Run)
		case was != r.Run:
			t.Errorf("run %s changed:\nwas %+v\nnow %+v", r.ID, was, r.Run)
		}
		delete(old, r.ID)
	}
	for id := range old {
		t.Errorf("run %s is gone", id)
	}
}

func fileHash(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}
