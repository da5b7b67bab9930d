package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox"
)

// Guests under testdata/guests, built once per test binary (and cached by
// content hash across runs by guestbuild).
var (
	guestsOnce sync.Once
	guests     map[string][]byte
	guestsErr  error
)

func guest(t testing.TB, name string) []byte {
	t.Helper()
	guestsOnce.Do(func() {
		guests = map[string][]byte{}
		root := filepath.Join("..", "testdata", "guests")
		ents, err := os.ReadDir(root)
		if err != nil {
			guestsErr = err
			return
		}
		for _, e := range ents {
			dir := filepath.Join(root, e.Name())
			if !e.IsDir() || strings.HasPrefix(e.Name(), "engine-") || strings.HasPrefix(e.Name(), "cli-") {
				continue
			}
			reactor, err := guestbuild.IsReactor(dir)
			if err != nil {
				guestsErr = err
				return
			}
			wasm, _, err := guestbuild.Build(context.Background(), dir, guestbuild.Options{Reactor: reactor})
			if err != nil {
				guestsErr = fmt.Errorf("building %s: %w", dir, err)
				return
			}
			guests[e.Name()] = wasm
		}
	})
	if guestsErr != nil {
		t.Fatal(guestsErr)
	}
	w, ok := guests[name]
	if !ok {
		t.Fatalf("no guest %q", name)
	}
	return w
}

type env struct {
	k    *kernel.Kernel
	eng  sandbox.Engine
	kind *kerneltest.Kind
}

// newEnv starts an engine and a kernel with the test kind; opts adjust the
// kernel's configuration.
func newEnv(t testing.TB, opts ...func(*kernel.Config)) *env {
	t.Helper()
	eng := testengine.New(t)
	kind := kerneltest.New()
	cfg := kernel.Config{Engine: eng, Kinds: []kindapi.Kind{kind}}
	for _, o := range opts {
		o(&cfg)
	}
	k, err := kernel.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{k: k, eng: eng, kind: kind}
}

func (e *env) spec(t testing.TB, name string, limits kernel.Limits, input string) kernel.TaskSpec {
	t.Helper()
	mod, err := e.eng.Compile(context.Background(), guest(t, name))
	if err != nil {
		t.Fatal(err)
	}
	scope, err := e.k.Grant("test", kindapi.GrantContext{}, []byte(`{"level":5}`))
	if err != nil {
		t.Fatal(err)
	}
	s := kernel.TaskSpec{
		Module: mod, Principal: "mallory", Limits: limits,
		Grants: []kernel.GrantSpec{{Name: "test", Kind: "test", Scope: scope}},
	}
	if input != "" {
		s.Input = []byte(input)
	}
	return s
}

// healthy runs a well-behaved task after a hostile one: the kernel and the
// engine must still work normally.
func (e *env) healthy(t *testing.T) {
	t.Helper()
	task, err := e.k.Run(context.Background(), e.spec(t, "well-behaved", kernel.Limits{Timeout: 30 * time.Second}, "still alive"))
	if err != nil {
		t.Fatalf("well-behaved task after a hostile one: %v", err)
	}
	if got, _ := task.Result(); string(got) != "still alive" {
		t.Fatalf("well-behaved result = %q", got)
	}
}

func resultMap(t *testing.T, task *kernel.Task) map[string]string {
	t.Helper()
	raw, ok := task.Result()
	if !ok {
		t.Fatalf("no result; stderr: %s", task.Stderr())
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("result %q: %v", raw, err)
	}
	return m
}

func TestHostileHandles(t *testing.T) {
	e := newEnv(t)
	task, err := e.k.Run(context.Background(), e.spec(t, "hostile-handles", kernel.Limits{}, ""))
	if err != nil {
		t.Fatalf("run: %v\nstderr: %s", err, task.Stderr())
	}
	got := resultMap(t, task)
	want := map[string]string{
		"lookup":                    "ESUCCESS",
		"lookup_missing":            "ENOTFOUND",
		"invented":                  "EBADHANDLE",
		"derive":                    "ESUCCESS",
		"drop":                      "ESUCCESS",
		"stale_after_drop":          "EBADHANDLE",
		"double_drop":               "EBADHANDLE",
		"revoke":                    "ESUCCESS",
		"child_after_revoke":        "EREVOKED",
		"derive_after_revoke":       "EREVOKED",
		"parent_after_child_revoke": "ESUCCESS",
		"blob_as_cap":               "EWRONGTYPE",
		"cap_as_blob":               "EWRONGTYPE",
		"widen":                     "EDENIED",
		"widen_ops":                 "EDENIED",
		"derive_garbage":            "EINVAL",
		"unknown_op":                "ENOTSUP",
		"kind_panic":                "EINTERNAL",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: got %s, want %s", k, got[k], w)
		}
	}
	if task.Denials() < 8 {
		t.Errorf("denials = %d, want every refusal recorded", task.Denials())
	}
	// The graph shows the derived caps and the revocation.
	g := e.k.Graph()
	revoked := 0
	for _, c := range g.Caps {
		if c.Revoked {
			revoked++
		}
	}
	if revoked != 2 {
		t.Errorf("graph has %d revoked caps, want 2 (d2 and d3)", revoked)
	}
	e.healthy(t)
}

func TestHostilePointers(t *testing.T) {
	e := newEnv(t)
	task, err := e.k.Run(context.Background(), e.spec(t, "hostile-pointers", kernel.Limits{}, ""))
	if err != nil {
		t.Fatalf("run: %v\nstderr: %s", err, task.Stderr())
	}
	got := resultMap(t, task)
	want := map[string]string{
		"lookup_ok":         "ESUCCESS",
		"lookup_name_oob":   "EFAULT",
		"lookup_name_huge":  "ELIMIT",
		"lookup_out_oob":    "EFAULT",
		"call_op_oob":       "EFAULT",
		"call_op_wrap":      "EFAULT",
		"call_args_wrap":    "ELIMIT",
		"call_args_oob":     "EFAULT",
		"call_out_oob":      "EFAULT",
		"call_ok":           "ESUCCESS",
		"derive_req_oob":    "EFAULT",
		"derive_req_huge":   "ELIMIT",
		"blob_create_wrap":  "EFAULT",
		"blob_create_huge":  "ELIMIT",
		"blob_read_buf_oob": "EFAULT",
		"blob_read_out_oob": "EFAULT",
		"blob_read_offset":  "EINVAL",
		"blob_len_out_oob":  "EFAULT",
		"last_error_oob":    "EFAULT",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: got %s, want %s", k, got[k], w)
		}
	}
	if e.kind.Calls.Load() != 1 {
		t.Errorf("kind saw %d calls, want exactly the one valid call", e.kind.Calls.Load())
	}
	e.healthy(t)
}

func TestHostileSpinStoppedAtDeadline(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	task, err := e.k.Run(context.Background(), e.spec(t, "hostile-spin", kernel.Limits{Timeout: 300 * time.Millisecond}, ""))
	if !errors.Is(err, sandbox.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if task.State() != kernel.TaskTimedOut {
		t.Fatalf("state = %s, want %s", task.State(), kernel.TaskTimedOut)
	}
	if !strings.Contains(err.Error(), "deadline") {
		t.Errorf("error %q does not say deadline", err)
	}
	t.Logf("stopped after %v", time.Since(start))
	e.healthy(t)
}

func TestHostileMemoryBomb(t *testing.T) {
	e := newEnv(t)
	task, err := e.k.Run(context.Background(), e.spec(t, "hostile-membomb", kernel.Limits{Memory: 48 << 20, Timeout: time.Minute}, ""))
	if !errors.Is(err, sandbox.ErrMemoryLimit) {
		t.Fatalf("err = %v, want ErrMemoryLimit", err)
	}
	if task.State() != kernel.TaskOutOfMemory {
		t.Fatalf("state = %s", task.State())
	}
	e.healthy(t)
}

func TestHostileFlood(t *testing.T) {
	e := newEnv(t)
	task, err := e.k.Run(context.Background(), e.spec(t, "hostile-flood", kernel.Limits{MaxOutput: 64 << 10, Timeout: time.Minute}, ""))
	if err != nil {
		t.Fatal(err)
	}
	out := task.Stdout()
	if len(out.Data) != 64<<10 || !out.Truncated || out.Dropped < 99<<20 {
		t.Fatalf("stdout kept %d bytes, truncated=%v, dropped=%d; want 64KiB kept and the rest dropped", len(out.Data), out.Truncated, out.Dropped)
	}
	if !strings.Contains(out.String(), "[output truncated") {
		t.Error("truncation is not marked")
	}
	if got, _ := task.Result(); string(got) != "survived" {
		t.Fatalf("result %q", got)
	}
	e.healthy(t)
}

func TestHostileHandleBomb(t *testing.T) {
	e := newEnv(t)
	task, err := e.k.Run(context.Background(), e.spec(t, "hostile-handlebomb", kernel.Limits{MaxHandles: 100}, ""))
	if err != nil {
		t.Fatal(err)
	}
	// One slot holds the granted capability.
	if got, _ := task.Result(); string(got) != "99 ELIMIT ESUCCESS" {
		t.Fatalf("result %q, want 99 blobs then ELIMIT, then room after a drop", got)
	}
	e.healthy(t)
}

// TestConcurrentTasks runs hostile and well-behaved tasks side by side.
func TestConcurrentTasks(t *testing.T) {
	e := newEnv(t)
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			name := []string{"hostile-handles", "hostile-pointers", "well-behaved"}[i%3]
			task, err := e.k.Run(context.Background(), e.spec(t, name, kernel.Limits{}, "x"))
			if err != nil {
				t.Errorf("%s: %v (%s)", name, err, task.Stderr())
			}
		}(i)
	}
	wg.Wait()
}

func TestKillTask(t *testing.T) {
	e := newEnv(t)
	task, err := e.k.Start(context.Background(), e.spec(t, "hostile-spin", kernel.Limits{Timeout: time.Minute}, ""))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	task.Kill()
	if err := task.Wait(context.Background()); err == nil || task.State() != kernel.TaskKilled {
		t.Fatalf("after Kill: err=%v state=%s", err, task.State())
	}
}

// TestHostRevokesRunningTask: the host revokes a task's root capability
// while it runs; the task sees EREVOKED at its next use.
func TestHostRevokesRunningTask(t *testing.T) {
	e := newEnv(t)
	task, err := e.k.Start(context.Background(), e.spec(t, "revoke-wait", kernel.Limits{}, ""))
	if err != nil {
		t.Fatal(err)
	}
	for e.kind.Calls.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	c, _ := task.CapByName("test")
	if _, err := e.k.RevokeID(c.ID()); err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, _ := task.Result(); string(got) != "EREVOKED" {
		t.Fatalf("result %q, want EREVOKED", got)
	}
}

func TestZeroAmbientAuthorityGraph(t *testing.T) {
	e := newEnv(t)
	task, err := e.k.Run(context.Background(), e.spec(t, "well-behaved", kernel.Limits{}, "hi"))
	if err != nil {
		t.Fatal(err)
	}
	g := e.k.Graph()
	var held []string
	for _, c := range g.Caps {
		if c.Holder == task.ID() {
			held = append(held, c.Name)
		}
	}
	if len(held) != 1 || held[0] != "test" {
		t.Fatalf("task holds %v, want exactly its one grant", held)
	}
}
