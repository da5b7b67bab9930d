package webui

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/internal/approvals"
	"github.com/mandatevm/mandate/internal/mcpclients"
	"github.com/mandatevm/mandate/runstore"
)

// AuditFile is the audit log's file in the state directory, as mandate
// run writes it.
const AuditFile = "audit.db"

// stores are the state directory's run store and audit log, opened
// read-only when first needed (a state directory may have nothing yet;
// opening is retried on each use until it works) and kept open.
type stores struct {
	dir    string
	src    RunSource // when set, the runs come from it and dir is unused
	logger hclog.Logger

	mu        sync.Mutex // guards runs, log, approvals, clients and closed
	runs      *runstore.Store
	log       *audit.Log
	approvals *approvals.Store  // opened for writing: answers are written
	clients   *mcpclients.Store // read-only: a reset opens it for writing apart
	// closed is set by close: nothing is opened after it.
	closed bool

	verifyMu sync.Mutex    // one verification at a time; guards verified
	verified *verification // the last one, nil before the first
}

func newStores(dir string, src RunSource, logger hclog.Logger) *stores {
	return &stores{dir: dir, src: src, logger: logger}
}

// path is the state directory's file name; "" (which no stat finds) when
// the runs come from a RunSource.
func (s *stores) path(name string) string {
	if s.src != nil {
		return ""
	}
	return filepath.Join(s.dir, name)
}

func (s *stores) runsPath() string  { return s.path(runstore.FileName) }
func (s *stores) auditPath() string { return s.path(AuditFile) }

// errClosed is returned once the server is closed.
var errClosed = errors.New("webui: closed")

// runStore returns the run store, opening it read-only the first time it
// exists; runstore.ErrNoRuns while it does not.
func (s *stores) runStore() (*runstore.Store, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	if s.runs != nil {
		return s.runs, nil
	}
	if s.src != nil {
		return nil, runstore.ErrNoRuns
	}
	st, err := runstore.OpenReadOnly(s.dir)
	if err != nil {
		return nil, err
	}
	s.runs = st
	return st, nil
}

// auditLog returns the audit log, opened read-only (with its key, to check
// signatures) the first time it exists; an error wrapping fs.ErrNotExist
// while it does not.
func (s *stores) auditLog() (*audit.Log, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	if s.log != nil {
		return s.log, nil
	}
	if s.src != nil {
		return nil, errNoStateDir
	}
	if _, err := os.Stat(s.auditPath()); err != nil {
		return nil, err
	}
	l, err := audit.OpenReadOnly(s.auditPath())
	if err != nil {
		return nil, err
	}
	s.log = l
	return l, nil
}

func (s *stores) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	var errs []error
	if s.runs != nil {
		errs = append(errs, s.runs.Close())
		s.runs = nil
	}
	if s.log != nil {
		errs = append(errs, s.log.Close())
		s.log = nil
	}
	if s.approvals != nil {
		errs = append(errs, s.approvals.Close())
		s.approvals = nil
	}
	if s.clients != nil {
		errs = append(errs, s.clients.Close())
		s.clients = nil
	}
	return errors.Join(errs...)
}

// list is the run store's List (or the RunSource's); no runs (no store
// yet) is an empty list.
func (s *stores) list(ctx context.Context) ([]runstore.Summary, error) {
	if s.src != nil {
		runs, err := s.src.List(ctx)
		out := make([]runstore.Summary, len(runs))
		for i, r := range runs {
			out[i] = r.Summary
		}
		return out, err
	}
	st, err := s.runStore()
	if errors.Is(err, runstore.ErrNoRuns) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return st.List(ctx)
}

// legacyRecords reports whether the state directory holds run records of
// the earlier JSON format, which only a writing command imports.
func (s *stores) legacyRecords() bool {
	if s.src != nil {
		return false
	}
	m, _ := filepath.Glob(filepath.Join(s.dir, "runs", "*.json"))
	return len(m) > 0
}

// fileSig is what changes when a SQLite database in WAL mode is written:
// the size and modification time of the file and of its -wal file.
type fileSig string

func statSig(path string) fileSig {
	var b []byte
	for _, p := range []string{path, path + "-wal"} {
		fi, err := os.Stat(p)
		if err != nil {
			b = append(b, "-;"...)
			continue
		}
		b = fmt.Appendf(b, "%d,%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return fileSig(b)
}

// verification is one run of audit.Log.Verify (the code mandate audit
// verify runs) over the whole log.
type verification struct {
	sig    fileSig // of the log when verified
	at     time.Time
	took   time.Duration
	report *audit.VerifyReport // nil when err is not a tamper error
	err    error
}

// verify verifies the audit log, or returns the last verification when
// the log has not changed since. A log that changes all the time (a
// long MCP session) is verified again at most every ten times what the
// last verification took, and at least a second apart; stale says the
// verdict is older than the log.
func (s *stores) verify(ctx context.Context, l *audit.Log) (v *verification, stale bool) {
	s.verifyMu.Lock()
	defer s.verifyMu.Unlock()
	sig := statSig(s.auditPath())
	if p := s.verified; p != nil {
		if p.sig == sig {
			return p, false
		}
		if time.Since(p.at) < max(time.Second, 10*p.took) {
			return p, true
		}
	}
	start := time.Now()
	rep, err := l.Verify(ctx)
	v = &verification{sig: sig, at: start, took: time.Since(start), report: rep, err: err}
	if err != nil && !errors.Is(err, audit.ErrTampered) {
		v.report = nil
		s.logger.Warn("verifying the audit log", "error", err)
	}
	s.verified = v
	return v, false
}

// notExist reports whether err says a file is missing.
func notExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
