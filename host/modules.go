package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/sdkembed"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/manifest"
	"github.com/mandatevm/mandate/sandbox"
)

// moduleSet is the run's kernel.ModuleResolver: the modules its spawn
// capabilities name, built and compiled before the run starts, by digest.
// The modules are the host's (moduleCache), which the run releases as it
// ends; the set only says which of them this run may spawn.
type moduleSet struct {
	mods map[string]sandbox.Module
}

var _ kernel.ModuleResolver = (*moduleSet)(nil)

// Module implements kernel.ModuleResolver.
func (s *moduleSet) Module(_ context.Context, digest string) (sandbox.Module, error) {
	m, ok := s.mods[digest]
	if !ok {
		return nil, fmt.Errorf("module %s is not one this run's manifest names", digest)
	}
	return m, nil
}

func newModuleSet() *moduleSet { return &moduleSet{mods: map[string]sandbox.Module{}} }

// setRoot adds the root task's module, so a task may spawn its own kind.
func (s *moduleSet) setRoot(m sandbox.Module) {
	if _, ok := s.mods[m.Digest()]; !ok {
		s.mods[m.Digest()] = m
	}
}

// readSpawnModules rewrites the modules of every cap "spawn" block of
// caps: an entry that is a path (relative to dir) of a .wasm file or a
// guest directory is read or built and replaced by its digest, so the kind
// sees digests only. An entry that is already a digest must be the digest
// of a module named elsewhere (rootDigest, the task's own, or another
// entry), since the run can run nothing else. It returns the modules read,
// by digest, for Run.addModules to compile.
func readSpawnModules(ctx context.Context, caps []manifest.Cap, dir, cache, rootDigest string) (map[string]spawnModule, error) {
	wasms := map[string]spawnModule{}
	for i := range caps {
		c := &caps[i]
		if c.Kind != "spawn" {
			continue
		}
		var spec map[string]any
		if err := json.Unmarshal(c.Spec, &spec); err != nil {
			return nil, c.Error(err)
		}
		list, _ := spec["modules"].([]any)
		var digests []any
		var pinned []string
		for _, v := range list {
			s, _ := v.(string)
			if sandbox.IsDigest(strings.ToLower(s)) {
				pinned = append(pinned, strings.ToLower(s))
				digests = append(digests, strings.ToLower(s))
				continue
			}
			if s == "" {
				return nil, c.Error(&kindapi.FieldError{Field: "modules", Msg: "an entry is not a string"})
			}
			path := s
			if !filepath.IsAbs(path) {
				path = filepath.Join(dir, path)
			}
			var wasm []byte
			var d string
			fi, err := os.Stat(path)
			if err == nil && fi.IsDir() {
				if wasm, err = BuildGuest(ctx, path, false, cache); err == nil {
					d = sandbox.Digest(wasm)
				}
			} else if err == nil {
				wasm, d, err = readModuleFile(path, cache)
			}
			if err != nil {
				return nil, c.Error(&kindapi.FieldError{Field: "modules", Msg: fmt.Sprintf("module %s: %v", s, err)})
			}
			name, c := s, c
			wasms[d] = spawnModule{wasm: wasm, err: func(err error) error {
				return c.Error(&kindapi.FieldError{Field: "modules", Msg: fmt.Sprintf("module %s: %v", name, err)})
			}}
			digests = append(digests, d)
		}
		for _, d := range pinned {
			if _, ok := wasms[d]; !ok && d != rootDigest {
				return nil, c.Error(&kindapi.FieldError{Field: "modules", Msg: fmt.Sprintf("%s is not the digest of a module this manifest names; name the module's path instead", d)})
			}
		}
		if list != nil {
			spec["modules"] = digests
		}
		b, err := json.Marshal(spec)
		if err != nil {
			return nil, c.Error(err)
		}
		c.Spec = b
	}
	return wasms, nil
}

// spawnModule is a module a spawn capability names, read, and how to
// report an error of it (at the cap block, by the name it was given).
type spawnModule struct {
	wasm []byte
	err  func(error) error
}

// addModules compiles wasms (by digest) through the host's cache, under
// cfg, into the run's module set: what its spawn capabilities may start.
func (r *Run) addModules(ctx context.Context, wasms map[string]spawnModule, cfg sandbox.CompileConfig) error {
	for d, m := range wasms {
		mod, err := r.compile(ctx, m.wasm, d, cfg)
		if err != nil {
			return m.err(err)
		}
		r.modules.mods[d] = mod
	}
	return nil
}

// BuildGuest builds the guest in dir (a Go main package in a module, a C
// guest, or a Rust crate; see "mandate new"), its build cache under
// cache/guests. What a person building should know (the SDK embedded in
// this binary was used) goes to the function WithBuildNotes put in ctx.
func BuildGuest(ctx context.Context, dir string, reactor bool, cache string) ([]byte, error) {
	// Build where the guest really is, inside its module.
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	note, _ := ctx.Value(buildNotesKey{}).(func(string))
	if note != nil {
		// A build that takes a while (a guest's first, or one whose
		// sources changed) is said, so that a first run is not silent.
		// The notes are serialised, and none is given once the build
		// returned: the caller's note need not be safe for concurrent use.
		var mu sync.Mutex
		done := false
		outer := note
		note = func(msg string) {
			mu.Lock()
			defer mu.Unlock()
			if !done {
				outer(msg)
			}
		}
		slow := time.AfterFunc(slowStep, func() {
			note("building the guest in " + dir + " (built once; later runs use the cache while its sources stay the same)")
		})
		defer func() {
			slow.Stop()
			mu.Lock()
			done = true
			mu.Unlock()
		}()
	}
	wasm, _, err := guestbuild.Build(ctx, dir, guestbuild.Options{
		CacheDir:  filepath.Join(cache, "guests"),
		Reactor:   reactor,
		MainEntry: true, // a command starts from a snapshot too
		Note:      note,
	})
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "guestbuild: ")
		if strings.Contains(msg, "go.mod file not found") {
			msg += "\nhint: a Go guest is a main package in a module whose go.mod requires " +
				guestbuild.SDKModule + " " + sdkembed.Version + "; \"mandate new NAME\" writes one " +
				"(mandate build supplies the SDK from its own copy when the go tool cannot fetch it)"
		}
		return nil, errors.New(msg)
	}
	return wasm, nil
}

type buildNotesKey struct{}

// slowStep is how long a guest's build or a module's compile goes on
// before it is said.
var slowStep = time.Second

// WithBuildNotes returns ctx carrying note, which BuildGuest (and Open and
// Start, when they build a manifest's guests) tells what a person building
// should know.
func WithBuildNotes(ctx context.Context, note func(msg string)) context.Context {
	return context.WithValue(ctx, buildNotesKey{}, note)
}

// loadModule reads or builds a manifest's module, a .wasm file (its
// digest kept while the file is unchanged: digestcache.go) or a Go guest
// directory built into the cache, and returns it with its digest.
func loadModule(ctx context.Context, m *manifest.Manifest, cache string) ([]byte, string, error) {
	if m.ModuleIsDir {
		wasm, err := BuildGuest(ctx, m.ModulePath, false, cache)
		if err != nil {
			return nil, "", err
		}
		return wasm, sandbox.Digest(wasm), nil
	}
	return readModuleFile(m.ModulePath, cache)
}
