package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mandatevm/mandate/manifest"
	"github.com/mandatevm/mandate/sandbox"
	"github.com/nats-io/nats.go/jetstream"
)

// BuildFunc builds a guest folder into a module (host.BuildGuest).
type BuildFunc func(ctx context.Context, dir string) ([]byte, error)

// Bundle reads the manifest at path (with vars) and what it names: the
// module (built with build when it is a folder), each spawn capability's
// modules given by path, and each seed file, by their paths relative to
// the manifest's folder. A path outside that folder is refused: a node
// recreates the folder, nothing above it.
func Bundle(ctx context.Context, path string, vars map[string]string, input []byte, build BuildFunc) (Submission, map[string][]byte, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return Submission{}, nil, err
	}
	m, err := manifest.Load(path, vars)
	if err != nil {
		return Submission{}, nil, err
	}
	dir := m.Dir
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	s := Submission{ID: newID(), Manifest: filepath.Base(path), Source: src, Vars: vars, Input: input,
		Files: map[string]File{}, Time: time.Now().UTC(), Retry: m.Retry}
	modules := map[string][]byte{}
	rel := func(abs string) (string, error) {
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
		r, err := filepath.Rel(dir, abs)
		if err != nil || r == "." || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) || filepath.IsAbs(r) {
			return "", fmt.Errorf("%s is outside the manifest's folder %s: a fleet run carries that folder alone", abs, dir)
		}
		return filepath.ToSlash(r), nil
	}
	addModule := func(abs string, root bool) error {
		r, err := rel(abs)
		if root && r == "" && err != nil && samePath(abs, dir) {
			err = nil // the manifest's own folder: a tool's module = "."
		}
		if err != nil {
			return err
		}
		var wasm []byte
		if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
			wasm, err = build(ctx, abs)
			if err != nil {
				return err
			}
		} else if wasm, err = os.ReadFile(abs); err != nil {
			return err
		}
		d := sandbox.Digest(wasm)
		modules[d] = wasm
		if root {
			s.Module = d
		}
		if r != "" {
			s.Files[r] = File{Module: d}
		}
		return nil
	}
	if err := addModule(m.ModulePath, true); err != nil {
		return Submission{}, nil, err
	}
	for _, c := range m.Caps {
		if c.Kind != "spawn" {
			continue
		}
		var spec struct {
			Modules []string `json:"modules"`
		}
		json.Unmarshal(c.Spec, &spec)
		for _, p := range spec.Modules {
			if sandbox.IsDigest(strings.ToLower(p)) {
				continue
			}
			if !filepath.IsAbs(p) {
				p = filepath.Join(m.Dir, p)
			}
			if err := addModule(p, false); err != nil {
				return Submission{}, nil, err
			}
		}
	}
	for _, sd := range m.Seeds {
		r, err := rel(sd.File)
		if err != nil {
			return Submission{}, nil, err
		}
		b, err := os.ReadFile(sd.File)
		if err != nil {
			return Submission{}, nil, err
		}
		s.Files[r] = File{Data: b}
	}
	return s, modules, nil
}

// samePath reports whether a and b name one folder.
func samePath(a, b string) bool {
	if ra, err := filepath.EvalSymlinks(a); err == nil {
		a = ra
	}
	if rb, err := filepath.EvalSymlinks(b); err == nil {
		b = rb
	}
	return filepath.Clean(a) == filepath.Clean(b)
}

// Submit stores the submission's modules (those not stored yet), records
// it queued and publishes it for a node to take. It may be retried with
// the same submission after an error: the run is still queued once. A
// submission that could not be published leaves no state behind.
func (f *Fleet) Submit(ctx context.Context, s Submission, modules map[string][]byte) error {
	for d, wasm := range modules {
		if _, err := f.Modules.GetInfo(ctx, d); err == nil {
			continue
		} else if !errors.Is(err, jetstream.ErrObjectNotFound) {
			return fmt.Errorf("fleet: module %s: %w", d, err)
		}
		if _, err := f.Modules.PutBytes(ctx, d, wasm); err != nil {
			return fmt.Errorf("fleet: storing module %s: %w", d, err)
		}
	}
	state, err := json.Marshal(RunState{ID: s.ID, State: StateQueued, Submitted: s.Time, Retry: s.Retry})
	if err != nil {
		return err
	}
	rev, err := f.States.Create(ctx, s.ID, state)
	if errors.Is(err, jetstream.ErrKeyExists) {
		// A retried Submit: publish again unless a node took it (the
		// message id makes a second publish count once).
		cur, crev, err := f.State(ctx, s.ID)
		if err != nil {
			return err
		} else if cur.State != StateQueued {
			return nil
		}
		rev = crev
	} else if err != nil {
		return fmt.Errorf("fleet: recording submission %s: %w", s.ID, err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if _, err := f.JS.Publish(ctx, SubjectSubmit, b, jetstream.WithMsgID(s.ID)); err != nil {
		// Not published (or its answer was lost): the state goes, unless
		// a node claimed it meanwhile (then it was published after all).
		// A message that did get through finds no state and is dropped,
		// recorded refused (Node.stateNotFound).
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
		defer cancel()
		if perr := f.States.Purge(dctx, s.ID, jetstream.LastRevision(rev)); perr != nil {
			err = errors.Join(err, fmt.Errorf("its queued state stays: %w", perr))
		}
		return fmt.Errorf("fleet: publishing submission %s: %w", s.ID, err)
	}
	return nil
}

// Wait returns the submission's state once it is final. While waiting it
// also judges the node running it as the nodes do (by the lease the node
// publishes with its heartbeats, plus Margin, confirmed from the bucket's
// leader) and marks the run lost when that node is dead, so a submitter
// never waits on a dead node; lease is what a node that publishes none is
// judged by.
func (f *Fleet) Wait(ctx context.Context, id string, lease time.Duration) (RunState, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := f.States.Watch(wctx, id)
	if err != nil {
		return RunState{}, err
	}
	defer w.Stop()
	live, err := f.watchLiveness(wctx, lease)
	if err != nil {
		return RunState{}, err
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var cur RunState // the last state seen
	for {
		select {
		case <-ctx.Done():
			return RunState{}, ctx.Err()
		case <-tick.C:
			if cur.State == StateRunning {
				if silent, _ := live.silent(cur.Node, cur.Incarnation); silent {
					f.reapOne(ctx, live, id)
				}
			}
		case e, ok := <-w.Updates():
			if !ok {
				return RunState{}, errors.New("fleet: the state watch ended")
			}
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue // the initial values are all delivered; a purge
			}
			var s RunState
			if err := json.Unmarshal(e.Value(), &s); err != nil {
				return RunState{}, err
			}
			if s.Final() {
				return s, nil
			}
			cur = s
		}
	}
}
