package attacks_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox"
)

// TestPipelineHostChildren: the pipeline table's rows for a child the host
// starts (kernel.Task.StartChild: an MCP tool call), on the suite's engine.
// The session task holds the env's grants; each row's start is refused at
// one step (clearance, a passed capability, the parent's children, the
// kernel's running tasks), and the refusal leaves nothing: no child, no
// capability minted, no request at the granted server, no "allow" for a
// start in the audit log, and every reservation given back (the start
// that follows, with the obstacle gone, runs the pipeline guest's fetch).
func TestPipelineHostChildren(t *testing.T) {
	pii := kindapi.NewLabel([]string{"pii:alice"}, nil)
	public := kindapi.Label{}
	rows := []struct {
		step string
		// setup breaks the start; it returns the refused spec and what
		// clears the obstacle.
		setup func(t *testing.T, e *env, session *kernel.Task, spec kernel.ChildSpec) (kernel.ChildSpec, func())
		want  abi.Errno
	}{
		{"clearance", func(t *testing.T, e *env, session *kernel.Task, spec kernel.ChildSpec) (kernel.ChildSpec, func()) {
			if err := session.Observe(pii); err != nil {
				t.Fatal(err)
			}
			spec.Clearance = &public
			return spec, func() {}
		}, abi.EFLOW},
		{"pass", func(t *testing.T, e *env, session *kernel.Task, spec kernel.ChildSpec) (kernel.ChildSpec, func()) {
			c, _ := session.CapByName("card")
			e.k.Revoke(c)
			spec.Caps = append(spec.Caps, kernel.PassedCap{Name: "card", Cap: c})
			return spec, func() {}
		}, abi.EREVOKED},
		{"children", func(t *testing.T, e *env, session *kernel.Task, spec kernel.ChildSpec) (kernel.ChildSpec, func()) {
			first := spec
			first.Input = nil
			first.Module = sandbox.IdleModule{}
			c, err := session.StartChild(context.Background(), first)
			if err != nil {
				t.Fatal(err)
			}
			spec.MaxChildren = 1
			return spec, func() { c.Kill(); <-c.Done() }
		}, abi.ELIMIT},
		{"tasks", func(t *testing.T, e *env, session *kernel.Task, spec kernel.ChildSpec) (kernel.ChildSpec, func()) {
			idle := spec
			idle.Input = nil
			idle.Module = sandbox.IdleModule{}
			c, err := session.StartChild(context.Background(), idle) // the env's kernel runs two at most
			if err != nil {
				t.Fatal(err)
			}
			return spec, func() { c.Kill(); <-c.Done() }
		}, abi.ELIMIT},
	}
	for _, r := range rows {
		t.Run(r.step, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{maxTasks: 2})
			ctx := context.Background()
			session, err := e.k.Start(ctx, kernel.TaskSpec{Module: sandbox.IdleModule{}, Principal: "alice", Name: "session",
				Clearance: &pii, Grants: e.grantSpecs(t, envOptions{}), Limits: kernel.Limits{Timeout: time.Hour}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { session.Kill(); <-session.Done() })
			web, _ := session.CapByName("web")
			spec := kernel.ChildSpec{Module: e.module(t, "pipeline"), Name: "tool",
				Input:       e.input("pipeline", "{"+planFetch+"}"),
				Limits:      kernel.Limits{Timeout: hangGuard, Memory: 64 << 20},
				MaxChildren: 4,
				Caps:        []kernel.PassedCap{{Name: "web", Cap: web}}}
			refused, clear := r.setup(t, e, session, spec)
			g := e.k.Graph()
			tasks, caps := len(g.Tasks), len(g.Caps)
			allows := startAllows(t, e, session)
			before, _ := web.Usage()

			if _, err := session.StartChild(ctx, refused); kindapi.ErrnoOf(err) != r.want {
				t.Fatalf("start: %v, want %s", err, r.want)
			}
			g = e.k.Graph()
			if len(g.Tasks) != tasks || len(g.Caps) != caps {
				t.Errorf("after the refusal: %d tasks and %d capabilities, want %d and %d", len(g.Tasks), len(g.Caps), tasks, caps)
			}
			if n := startAllows(t, e, session); n != allows {
				t.Errorf("%d allow entries for starts after the refusal, want %d", n, allows)
			}
			if after, _ := web.Usage(); after != before {
				t.Errorf("the passed capability's usage went from %+v to %+v", before, after)
			}
			if n := len(e.granted.Requests()); n != 0 {
				t.Errorf("%d requests reached the granted server", n)
			}

			// The obstacle gone, the same places are there for the next
			// start, and its task runs on the engine.
			clear()
			spec.Clearance = nil
			c, err := session.StartChild(ctx, spec)
			if err != nil {
				t.Fatalf("the start after the refusal: %v", err)
			}
			if err := c.Wait(ctx); err != nil {
				t.Fatalf("the child: %v\n%s", err, c.Stderr())
			}
			raw, _ := c.Result()
			var res map[string]string
			if err := json.Unmarshal(raw, &res); err != nil || res["call0"] != want0(r.step) {
				t.Fatalf("the child's report %s: call0 %q, want %s", raw, res["call0"], want0(r.step))
			}
			if n := startAllows(t, e, session); n != allows+1 {
				t.Errorf("%d allow entries for starts, want %d", n, allows+1)
			}
		})
	}
}

// want0 is what the pipeline guest's fetch gets in the start after the
// row's refusal: a session that saw Alice's passport gives its label to
// the child, whose fetch to the public origin is then refused.
func want0(step string) string {
	if step == "clearance" {
		return "EFLOW"
	}
	return "ESUCCESS"
}

// startAllows counts the audit log's allow entries for starts by the
// session.
func startAllows(t *testing.T, e *env, session *kernel.Task) int {
	t.Helper()
	entries, err := e.alog.Entries(context.Background(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, en := range entries {
		if en.Decision == string(kernel.Allow) && en.Task == session.ID() && en.Op == "spawn" {
			n++
		}
	}
	return n
}
