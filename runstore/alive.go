package runstore

import (
	"os"
	"path/filepath"
	"sync"
)

// A running run's process holds an exclusive lock on STATE/running/ID.lock
// from Begin to Finish. The kernel releases a lock when its process ends,
// however it ends (SIGKILL, a crash, a power-off of the process), so a
// run still "running" in the store whose lock nobody holds is reported as
// crashed on the next read, never as running.

// StateCrashed is how a read reports a run recorded as running whose
// process has ended without recording the end (killed, crashed). It is
// never written: the record keeps what was known.
const StateCrashed = "crashed"

// liveLocks are the locks this process holds, by run id.
type liveLocks struct {
	mu    sync.Mutex
	files map[string]*os.File // protected by mu
}

func (s *Store) lockPath(id string) string {
	return filepath.Join(s.dir, "running", id+".lock")
}

// hold takes the lock of run id for this process.
func (s *Store) hold(id string) error {
	if err := os.MkdirAll(filepath.Join(s.dir, "running"), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(s.lockPath(id), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if err := lockFile(f, true); err != nil {
		f.Close()
		return err
	}
	s.live.mu.Lock()
	if s.live.files == nil {
		s.live.files = map[string]*os.File{}
	}
	s.live.files[id] = f
	s.live.mu.Unlock()
	return nil
}

// release gives up the lock of run id, once its end is recorded.
func (s *Store) release(id string) {
	s.live.mu.Lock()
	f := s.live.files[id]
	delete(s.live.files, id)
	s.live.mu.Unlock()
	if f != nil {
		os.Remove(f.Name())
		f.Close()
	}
}

// alive reports whether the process of running run id still runs: this
// store holds its lock, or another process does.
func (s *Store) alive(id string) bool {
	s.live.mu.Lock()
	_, mine := s.live.files[id]
	s.live.mu.Unlock()
	if mine {
		return true
	}
	f, err := os.Open(s.lockPath(id))
	if err != nil {
		return false // no lock: the process is gone (or predates locks)
	}
	defer f.Close()
	return lockFile(f, false) != nil // taken by someone: alive
}

// reportState is the state a read shows for a run recorded with state.
func (s *Store) reportState(id, state string) string {
	if state == StateRunning && !s.alive(id) {
		return StateCrashed
	}
	return state
}
