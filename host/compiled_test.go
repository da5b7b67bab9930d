package host_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/manifest"
	"github.com/mandatevm/mandate/sandbox"
)

// countingEngine is the engine under test, counting the modules it is
// asked to compile, by digest.
type countingEngine struct {
	sandbox.Engine

	mu       sync.Mutex
	compiles map[string]int // protected by mu
	closed   bool           // protected by mu
}

func (e *countingEngine) Compile(ctx context.Context, wasm []byte) (sandbox.Module, error) {
	return e.CompileWith(ctx, wasm, sandbox.CompileConfig{})
}

func (e *countingEngine) CompileWith(ctx context.Context, wasm []byte, cfg sandbox.CompileConfig) (sandbox.Module, error) {
	e.mu.Lock()
	e.compiles[sandbox.Digest(wasm)]++
	e.mu.Unlock()
	return e.Engine.CompileWith(ctx, wasm, cfg)
}

func (e *countingEngine) Close(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	return e.Engine.Close(ctx)
}

func (e *countingEngine) count(digest string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.compiles[digest]
}

// countingHost opens a host whose engine is a countingEngine; eng returns
// it once the first run made it.
func countingHost(t *testing.T) (h *host.Host, eng func() *countingEngine) {
	t.Helper()
	var mu sync.Mutex
	var made []*countingEngine
	host.AddEngineForTest("counting", func(ctx context.Context, _ string) (sandbox.Engine, error) {
		inner, err := host.NewEngine(ctx, testengine.Name(), testengine.CacheDir())
		if err != nil {
			return nil, err
		}
		e := &countingEngine{Engine: inner, compiles: map[string]int{}}
		mu.Lock()
		made = append(made, e)
		mu.Unlock()
		return e, nil
	})
	h, err := host.Open(context.Background(), host.Options{StateDir: t.TempDir(), CacheDir: testCache(), Engine: "counting"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h, func() *countingEngine {
		mu.Lock()
		defer mu.Unlock()
		if len(made) != 1 {
			t.Fatalf("the host made %d engines, want 1", len(made))
		}
		return made[0]
	}
}

// benefits loads a manifest of examples/benefits.
func benefits(t *testing.T, name string) *manifest.Manifest {
	t.Helper()
	m, err := manifest.Load(filepath.Join("..", "examples", "benefits", name), nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func runOnce(t *testing.T, h *host.Host, m *manifest.Manifest, input string) *host.Outcome {
	t.Helper()
	r, err := h.Start(context.Background(), host.RunSpec{Manifest: m, Input: []byte(input)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRunsShareCompiledModules: a second run of a manifest on a host
// compiles nothing; its module is the one the first run compiled.
func TestRunsShareCompiledModules(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a guest")
	}
	h, eng := countingHost(t)
	m := benefits(t, "alice.hcl")
	for i := range 2 {
		out := runOnce(t, h, m, "")
		if out.Exit != host.ExitOK || !strings.Contains(string(out.Result), "alice  plan=Gold PPO") {
			t.Fatalf("run %d: exit %d, %v, result %q", i, out.Exit, out.Err, out.Result)
		}
		if got := eng().count(out.Record.Run.Digest); got != 1 {
			t.Errorf("after run %d the module was compiled %d times, want 1", i, got)
		}
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if !eng().closed {
		t.Error("Close left the engine open")
	}
}

// TestConcurrentRunsShareOneEngine: runs at once on one engine and one
// compiled module each get their own kernel and instance: alice's own
// record, alice refused bob's, bob's own.
func TestConcurrentRunsShareOneEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a guest")
	}
	h, eng := countingHost(t)
	alice, bob := benefits(t, "alice.hcl"), benefits(t, "bob.hcl")
	type want struct {
		has, hasNot []string
	}
	cases := []struct {
		name  string
		m     *manifest.Manifest
		input string
		want  want
	}{
		{"alice", alice, "", want{[]string{"alice  plan=Gold PPO", "(1 record(s)"}, []string{"bob"}}},
		{"alice asks for bob", alice, "bob\n", want{[]string{"denied: read bob's benefits: cap_call: EDENIED", "denied: read bob's ssn field: EDENIED"}, []string{"Silver"}}},
		{"bob", bob, "", want{[]string{"bob    plan=Silver HMO", "(1 record(s)"}, []string{"alice"}}},
	}
	const n = 8
	runs := make([]*host.Run, n)
	for i := range n {
		c := cases[i%len(cases)]
		r, err := h.Start(context.Background(), host.RunSpec{Manifest: c.m, Input: []byte(c.input)})
		if err != nil {
			t.Fatalf("run %d (%s): %v", i, c.name, err)
		}
		runs[i] = r
	}
	digest := ""
	for i, r := range runs {
		c := cases[i%len(cases)]
		out, err := r.Wait(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		res := string(out.Result)
		if out.Exit != host.ExitOK {
			t.Errorf("run %d (%s): exit %d, %v", i, c.name, out.Exit, out.Err)
		}
		for _, s := range c.want.has {
			if !strings.Contains(res, s) {
				t.Errorf("run %d (%s): result %q, want it to have %q", i, c.name, res, s)
			}
		}
		for _, s := range c.want.hasNot {
			if strings.Contains(res, s) {
				t.Errorf("run %d (%s): result %q has %q", i, c.name, res, s)
			}
		}
		if p := out.Record.Run.Principal; p != c.m.Principal {
			t.Errorf("run %d (%s): recorded for %q, want %q", i, c.name, p, c.m.Principal)
		}
		digest = out.Record.Run.Digest
	}
	if got := eng().count(digest); got != 1 {
		t.Errorf("%d runs of one module compiled it %d times, want 1", n, got)
	}
}

// TestCompileErrorIsNotKept: a module that fails to compile refuses the
// run with the engine's error, and a later run compiles again (here, the
// file fixed in between).
func TestCompileErrorIsNotKept(t *testing.T) {
	dir := t.TempDir()
	leaf := filepath.Join(dir, "leaf.wasm")
	if err := os.WriteFile(leaf, []byte("not wasm"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Parse([]byte("task \"t\" {\n  module    = \"leaf.wasm\"\n  principal = \"alice\"\n}\n"), filepath.Join(dir, "t.hcl"), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, eng := countingHost(t)
	for i := range 2 {
		_, err := h.Start(context.Background(), host.RunSpec{Manifest: m})
		var re *host.RefusedError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), "leaf.wasm") {
			t.Fatalf("run %d: %v, want a RefusedError naming the module", i, err)
		}
	}
	if got := eng().count(sandbox.Digest([]byte("not wasm"))); got != 2 {
		t.Errorf("a module that does not compile was compiled %d times by 2 runs, want 2", got)
	}
	if err := os.WriteFile(leaf, leafModule(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := runOnce(t, h, m, ""); out.Exit != host.ExitOK {
		t.Fatalf("fixed: exit %d, %v", out.Exit, out.Err)
	}
}
