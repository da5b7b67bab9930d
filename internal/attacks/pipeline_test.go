package attacks_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/kernel"
)

// The pipeline table: for each step of the mediation pipeline
// (docs/ARCHITECTURE.md, "the mediation pipeline") and each kind, a guest (testdata/attacks/pipeline)
// whose call is refused exactly at that step, and a check that the refusal
// left nothing behind anywhere: no request at the granted server, no
// charge at the provider, no change in the data store, no debit of a
// budget or use, no rate token spent, no handle, no capability minted, no
// child task, and no "allow" for the call in the audit log.
//
// The rows "handles" failed before the one pipeline: the table was checked
// only when the result was installed, after the effect (the POST reached
// the server, the charge was made, the capability was minted), and the
// guest got ELIMIT.
type pipelineRow struct {
	step, kind string
	plan       string // the guest's plan (testdata/attacks/pipeline)
	// grant adjusts the row's grants before the run.
	grant func(e *env, gs []kernel.GrantSpec)
	// want is the errno of each call in order.
	want []string
	// effects is how many effects must have happened (requests at the
	// granted server, charges, children, minted capabilities).
	effects int
}

// Plans for one call of each kind.
const (
	planFetch  = `"cap":"web","op":"fetch","args":"{\"method\":\"POST\",\"url\":\"/api/pipeline\",\"body\":\"aGVsbG8=\"}"`
	planCharge = `"cap":"card","op":"charge","args":"{\"payee\":\"airline.example\",\"amount\":\"60.00\",\"currency\":\"USD\"}"`
	planWrite  = `"cap":"myplan","op":"write","args":"{\"id\":\"b-alice\",\"fields\":{\"plan\":\"\\\"bronze\\\"\"}}"`
	planRead   = `"cap":"mydata","op":"read","args":"{\"owner\":\"alice\",\"fields\":[\"plan\"]}"`
	planDerive = `"cap":"web","op":"derive","args":"{\"methods\":[\"GET\"]}"`
	planSpawn  = `"cap":"spawner","op":"spawn","args":"{\"module\":\"control\",\"caps\":[{\"name\":\"web\"},{\"name\":\"mydata\"}]}"`
)

func withGrant(name string, f func(g *kernel.GrantSpec)) func(*env, []kernel.GrantSpec) {
	return func(_ *env, gs []kernel.GrantSpec) {
		for i := range gs {
			if gs[i].Name == name {
				f(&gs[i])
			}
		}
	}
}

// constrain sets a `when` (and an approve_when) on a grant.
func constrain(t *testing.T, name, when, approve string) func(*env, []kernel.GrantSpec) {
	return func(e *env, gs []kernel.GrantSpec) {
		for i := range gs {
			if gs[i].Name != name {
				continue
			}
			var w, a []string
			if when != "" {
				w = []string{when}
			}
			if approve != "" {
				a = []string{approve}
			}
			cs, err := e.k.CompileConstraints(gs[i].Kind, w, a)
			if err != nil {
				t.Fatal(err)
			}
			gs[i].Constraints = cs
		}
	}
}

func pipelineRows(t *testing.T) []pipelineRow {
	calls := map[string]string{"net": planFetch, "pay": planCharge, "data": planWrite, "derive": planDerive, "spawn": planSpawn}
	var rows []pipelineRow
	// A full table: every kind, and derive and spawn.
	for _, k := range []string{"net", "pay", "derive", "spawn"} {
		rows = append(rows, pipelineRow{step: "handles", kind: k, plan: calls[k] + `,"prep":"fill"`, want: []string{"ELIMIT"}})
	}
	// A data read returns a blob (a write returns nothing, so a full
	// table does not stop it); the read is audited, and an audited read
	// is the effect that must not happen.
	rows = append(rows, pipelineRow{step: "handles", kind: "data", plan: planRead + `,"prep":"fill"`, want: []string{"ELIMIT"},
		grant: withGrant("mydata", func(g *kernel.GrantSpec) { g.Audit = true })})
	// Revoked: the capability was revoked before the call.
	for _, k := range []string{"net", "pay", "data", "derive", "spawn"} {
		rows = append(rows, pipelineRow{step: "revoked", kind: k, plan: calls[k] + `,"prep":"revoke"`, want: []string{"EREVOKED"}})
	}
	// Rate: one call an hour; the second is refused.
	rate := func(name string) func(*env, []kernel.GrantSpec) {
		return withGrant(name, func(g *kernel.GrantSpec) { g.Rate = kernel.Rate{N: 1, Per: time.Hour} })
	}
	for k, name := range map[string]string{"net": "web", "pay": "card", "data": "myplan", "spawn": "spawner"} {
		rows = append(rows, pipelineRow{step: "rate", kind: k, plan: calls[k] + `,"times":2`, grant: rate(name),
			want: []string{"ESUCCESS", "ELIMIT"}, effects: 1})
	}
	// Uses: max_uses = 1; the second is refused.
	uses := func(name string) func(*env, []kernel.GrantSpec) {
		return withGrant(name, func(g *kernel.GrantSpec) { g.Allowance = kernel.Allowance{MaxUses: 1} })
	}
	for k, name := range map[string]string{"net": "web", "pay": "card", "data": "myplan", "spawn": "spawner"} {
		rows = append(rows, pipelineRow{step: "uses", kind: k, plan: calls[k] + `,"times":2`, grant: uses(name),
			want: []string{"ESUCCESS", "ELIMIT"}, effects: 1})
	}
	// Budget: 50.00, a charge of 60.00.
	rows = append(rows, pipelineRow{step: "budget", kind: "pay", plan: planCharge,
		grant: withGrant("card", func(g *kernel.GrantSpec) { g.Allowance = kernel.Allowance{Budget: 5000} }),
		want:  []string{"ELIMIT"}})
	// Flow: the task read Alice's passport; web, the card and a public
	// child may not get it. (A data write's flow into a field is checked
	// in the store's transaction: refused, nothing is written.)
	for _, k := range []string{"net", "pay", "data"} {
		rows = append(rows, pipelineRow{step: "flow", kind: k, plan: calls[k] + `,"prep":"taint"`, want: []string{"EFLOW"}})
	}
	rows = append(rows, pipelineRow{step: "flow", kind: "spawn", plan: `"cap":"spawner","op":"spawn","prep":"taint","args":"{\"module\":\"control\",\"clearance\":[]}"`,
		want: []string{"EFLOW"}})
	// Constraints: a `when` that does not hold.
	for k, c := range map[string][2]string{
		"net": {"web", `request.method == "GET"`}, "pay": {"card", `charge.amount < 1.0`},
		"data": {"myplan", `args.id == "nothing"`}, "spawn": {"spawner", `size(args.caps) == 0`},
	} {
		rows = append(rows, pipelineRow{step: "constraints", kind: k, plan: calls[k], grant: constrain(t, c[0], c[1], ""), want: []string{"EDENIED"}})
	}
	// Approval: an approve_when that matches, and nobody says yes.
	for k, name := range map[string]string{"net": "web", "pay": "card", "data": "myplan", "spawn": "spawner"} {
		rows = append(rows, pipelineRow{step: "approval", kind: k, plan: calls[k], grant: constrain(t, name, "", "true"), want: []string{"EAPPROVAL"}})
	}
	// Refused calls spend nothing: a call refused by a constraint after
	// the reservation leaves the single use and the single rate token for
	// the legitimate call that follows.
	for step, g := range map[string]func(*env, []kernel.GrantSpec){"rate-kept": rate("web"), "uses-kept": uses("web")} {
		g := g
		rows = append(rows, pipelineRow{step: step, kind: "net",
			plan: `"cap":"web","op":"fetch","args":"{\"method\":\"POST\",\"url\":\"/api/forbidden\"}","then":"{\"method\":\"POST\",\"url\":\"/api/ok\"}"`,
			grant: func(e *env, gs []kernel.GrantSpec) {
				g(e, gs)
				constrain(t, "web", `request.path != "/api/forbidden"`, "")(e, gs)
			},
			want: []string{"EDENIED", "ESUCCESS"}, effects: 1})
	}
	return rows
}

func TestPipeline(t *testing.T) {
	for _, r := range pipelineRows(t) {
		t.Run(r.step+"/"+r.kind, func(t *testing.T) {
			t.Parallel()
			runPipelineRow(t, r)
		})
	}
}

// plan is the part of a row's plan the checks read.
type plan struct {
	Cap  string `json:"cap"`
	Prep string `json:"prep"`
}

func runPipelineRow(t *testing.T, r pipelineRow) {
	var p plan
	if err := json.Unmarshal([]byte("{"+r.plan+"}"), &p); err != nil {
		t.Fatalf("plan {%s}: %v", r.plan, err)
	}
	e := newEnv(t, envOptions{})
	grants := e.grantSpecs(t, envOptions{})
	if r.grant != nil {
		r.grant(e, grants)
	}
	ctx := context.Background()
	task, err := e.k.Run(ctx, kernel.TaskSpec{
		Module: e.module(t, "pipeline"), Principal: "alice", Grants: grants,
		Input:  e.input("pipeline", "{"+r.plan+"}"),
		Limits: kernel.Limits{Timeout: hangGuard, Memory: 64 << 20, MaxHandles: 64},
	})
	if err != nil {
		t.Fatalf("%v\nstderr: %s", err, task.Stderr())
	}
	raw, _ := task.Result()
	var res map[string]string
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("result %q: %v", raw, err)
	}
	for i, want := range r.want {
		k := "call" + strconv.Itoa(i)
		if res[k] != want {
			t.Fatalf("%s = %s (%s), want %s; report %v", k, res[k], res["#why"+strconv.Itoa(i)], want, res)
		}
	}

	// Nothing happened but the expected effects: requests at the granted
	// server, charges at the provider, store writes, children, and
	// capabilities minted by the call.
	effects := 0
	for _, req := range e.granted.Requests() {
		switch req.Path {
		case "/api/pipeline", "/api/forbidden", "/api/ok":
			effects++
		}
	}
	_, charges := e.providerTotal()
	effects += charges
	if e.dumpStore(t) != e.storeBefore {
		effects++
	}
	g := e.k.Graph()
	for _, tk := range g.Tasks {
		if tk.ID != task.ID() && r.kind == "spawn" {
			effects++
		}
	}
	// No capability was minted for a child that never ran.
	tasks := map[string]bool{}
	for _, tk := range g.Tasks {
		tasks[tk.ID] = true
	}
	for _, c := range g.Caps {
		if !tasks[c.Holder] {
			t.Errorf("capability %s was minted for %s, a task that never ran", c.ID, c.Holder)
		}
	}
	if r.kind == "derive" {
		for _, c := range g.Caps {
			if c.Parent != "" && c.Holder == task.ID() {
				effects++
			}
		}
		if p.Prep == "revoke" {
			effects-- // the child the guest derived to revoke
		}
	}
	if effects != r.effects {
		t.Errorf("%d effects happened, want %d; report %v", effects, r.effects, res)
	}
	// The table gave back every slot a refused call reserved.
	if p.Prep == "fill" && res["#free"] != res["#filled"] {
		t.Errorf("after the refused call, %s blobs fit where %s did: a reserved slot leaked", res["#free"], res["#filled"])
	}
	// The audit log says allow only for effects that happened (the card
	// is audited).
	entries, err := e.alog.Entries(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	allows := 0
	for _, en := range entries {
		if en.Decision == string(kernel.Allow) && en.Task == task.ID() && en.Op == "call:charge" {
			allows++
		}
		if en.Decision == string(kernel.Allow) && en.Task == task.ID() && en.Op == "call:read" && p.Cap == "mydata" {
			effects++ // an audited read happened
		}
	}
	if effects != r.effects {
		t.Errorf("%d effects happened counting audited reads, want %d; report %v", effects, r.effects, res)
	}
	if r.kind == "pay" && allows != r.effects {
		t.Errorf("the audit log has %d allow entries for the card's charges, want %d", allows, r.effects)
	}
	// Uses and rate tokens count effects only.
	for _, c := range task.Caps() {
		if c.Name() != p.Cap {
			continue
		}
		if u, ok := c.Usage(); ok && u.Uses != int64(r.effects) {
			t.Errorf("the capability counts %d uses, want %d (refused calls count nothing)", u.Uses, r.effects)
		}
	}
}
