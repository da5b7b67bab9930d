package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/caps/spawn"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox"
)

// resolver serves the compiled test guests by digest.
type resolver struct {
	eng  sandbox.Engine
	wasm map[string][]byte
}

func (r *resolver) Module(ctx context.Context, digest string) (sandbox.Module, error) {
	w, ok := r.wasm[digest]
	if !ok {
		return nil, fmt.Errorf("unknown module %s", digest)
	}
	return r.eng.Compile(ctx, w)
}

type spawnEnv struct {
	audit *recAudit
	*env
	digests map[string]string // guest name -> digest
}

func newSpawnEnv(t *testing.T, maxTasks int) *spawnEnv {
	t.Helper()
	res := &resolver{wasm: map[string][]byte{}}
	audit := &recAudit{}
	e := newEnv(t, func(c *kernel.Config) {
		c.Kinds = append(c.Kinds, spawn.New())
		c.Modules = res
		c.MaxTasks = maxTasks
		c.Auditor = audit
	})
	res.eng = e.eng
	se := &spawnEnv{env: e, digests: map[string]string{}, audit: audit}
	for _, g := range []string{"spawn-child", "hostile-spin", "revoke-wait", "well-behaved"} {
		w := guest(t, g)
		d := sandbox.Digest(w)
		res.wasm[d] = w
		se.digests[g] = d
	}
	return se
}

// run runs spawn-parent in a mode, granting spawn of spawn-child,
// hostile-spin and revoke-wait (not well-behaved).
func (se *spawnEnv) run(t *testing.T, mode string, spawnSpec string) (*kernel.Task, map[string]string) {
	t.Helper()
	if spawnSpec == "" {
		spawnSpec = fmt.Sprintf(`{"modules":[%q,%q,%q],"max_children":5}`,
			se.digests["spawn-child"], se.digests["hostile-spin"], se.digests["revoke-wait"])
	}
	in, _ := json.Marshal(map[string]string{
		"mode": mode, "child": se.digests["spawn-child"], "spin": se.digests["hostile-spin"],
		"wait": se.digests["revoke-wait"], "other": se.digests["well-behaved"],
	})
	spec := se.spec(t, "spawn-parent", kernel.Limits{Timeout: time.Minute, Memory: 128 << 20}, string(in))
	scope, err := se.k.Grant("spawn", kindapi.GrantContext{}, []byte(spawnSpec))
	if err != nil {
		t.Fatal(err)
	}
	spec.Grants = append(spec.Grants, kernel.GrantSpec{Name: "spawner", Kind: "spawn", Scope: scope})
	task, err := se.k.Run(context.Background(), spec)
	if err != nil {
		t.Fatalf("parent: %v\n%s", err, task.Stderr())
	}
	return task, resultMap(t, task)
}

func TestSpawnChildGetsOnlyWhatIsPassed(t *testing.T) {
	se := newSpawnEnv(t, 0)
	parent, got := se.run(t, "basic", "")
	if got["spawn"] != "ESUCCESS" || got["wait"] != "ESUCCESS" {
		t.Fatalf("spawn/wait: %v", got)
	}
	// The child saw its input, a level-2 test capability (narrowed from
	// the parent's 5), and no spawn capability: it was not passed. Asking
	// for the parent's level back was refused.
	if want := "input=hello level=2 spawner=ENOTFOUND widen=EDENIED"; got["result"] != want {
		t.Fatalf("child result %q, want %q", got["result"], want)
	}
	if got["wait_again"] != "ESUCCESS" {
		t.Errorf("a second wait: %s", got["wait_again"])
	}
	// The capability passed crossed a task boundary: an audit entry of its
	// own, naming the child and the narrowing, written before the child ran.
	passes := 0
	for _, ev := range se.audit.events() {
		if ev.Op == "pass" && ev.Decision == kernel.Allow && ev.Task == parent.ID() && strings.Contains(ev.Reason, `as "test", narrowed by`) {
			passes++
		}
	}
	if passes != 1 {
		t.Errorf("%d pass entries in the audit log, want 1: %+v", passes, se.audit.events())
	}
	// The graph records the child and the capability passed to it, derived
	// from the parent's.
	g := se.k.Graph()
	var child kernel.GraphTask
	for _, gt := range g.Tasks {
		if gt.Parent == parent.ID() {
			child = gt
		}
	}
	if child.ID == "" || child.State != kernel.TaskDone || child.Principal != "mallory" {
		t.Fatalf("graph has no finished child of %s: %+v", parent.ID(), g.Tasks)
	}
	var passed *kernel.GraphCap
	for i, c := range g.Caps {
		if c.Holder == child.ID {
			passed = &g.Caps[i]
		}
	}
	if passed == nil || passed.Parent == "" || passed.Name != "test" || string(passed.Scope) != `{"level":2,"ops":["noop","echo","level","panic","splice","spend","fail"]}` {
		t.Fatalf("passed capability in the graph: %+v", passed)
	}
}

func TestSpawnAttacks(t *testing.T) {
	se := newSpawnEnv(t, 0)
	_, got := se.run(t, "attacks", "")
	for k, want := range map[string]string{
		"widen_passed_cap":     "EDENIED",
		"module_not_allowed":   "EDENIED",
		"more_memory":          "EDENIED",
		"more_time":            "EDENIED",
		"invented_handle":      "EBADHANDLE",
		"not_a_spawn_cap":      "EWRONGTYPE",
		"cap_as_input":         "EWRONGTYPE",
		"wait_invented":        "EBADHANDLE",
		"widen_spawn_cap":      "EDENIED",
		"spawn_after_refusals": "ESUCCESS",
		"wait_after_refusals":  "ESUCCESS",
	} {
		if got[k] != want {
			t.Errorf("%s: got %s, want %s", k, got[k], want)
		}
	}
}

// A spawn bomb stops at the capability's max_children, and the kernel's
// MaxTasks bounds what runs at once whatever the capability says.
func TestSpawnBomb(t *testing.T) {
	se := newSpawnEnv(t, 0)
	_, got := se.run(t, "bomb", "")
	if got["spawned"] != "5" || got["stopped_by"] != "ELIMIT" {
		t.Fatalf("bomb: %v, want 5 children then ELIMIT", got)
	}
	se = newSpawnEnv(t, 3) // the parent and two children
	_, got = se.run(t, "bomb", fmt.Sprintf(`{"modules":[%q],"max_children":1000}`, se.digests["spawn-child"]))
	if got["stopped_by"] != "ELIMIT" {
		t.Fatalf("bomb under MaxTasks=3: %v", got)
	}
	se.healthy(t)
}

func TestSpawnRevokePassed(t *testing.T) {
	se := newSpawnEnv(t, 0)
	_, got := se.run(t, "revoke", "")
	if got["spawn"] != "ESUCCESS" || got["revoke"] != "ESUCCESS" || got["result"] != "EREVOKED" {
		t.Fatalf("revoke: %v, want the child to see EREVOKED", got)
	}
}

func TestSpawnKill(t *testing.T) {
	se := newSpawnEnv(t, 0)
	_, got := se.run(t, "kill", "")
	if got["spawn"] != "ESUCCESS" || got["kill"] != "ESUCCESS" || got["wait"] != "ECHILD" {
		t.Fatalf("kill: %v, want the killed child's wait to be ECHILD", got)
	}
	for _, gt := range se.k.Graph().Tasks {
		if gt.Parent != "" && gt.State != kernel.TaskKilled {
			t.Errorf("child %s state %s, want killed", gt.ID, gt.State)
		}
	}
}

// A child does not outlive its parent: when the parent ends, its running
// children are stopped, and the parent has ended only once they have: the
// graph taken right after the parent's Wait says killed, never running.
func TestSpawnNoOrphans(t *testing.T) {
	se := newSpawnEnv(t, 0)
	parent, got := se.run(t, "orphan", "")
	if got["spawn"] != "ESUCCESS" {
		t.Fatalf("spawn: %v", got)
	}
	var state kernel.TaskState
	for _, gt := range se.k.Graph().Tasks {
		if gt.Parent == parent.ID() {
			state = gt.State
		}
	}
	if state != kernel.TaskKilled {
		t.Fatalf("the orphaned child is %q when its parent's Wait returned, want killed", state)
	}
}
