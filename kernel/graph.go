package kernel

import (
	"encoding/json"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Graph is the capability graph of the kernel's tasks: who ran, on whose
// behalf, with what module, and every capability with its holder, parent
// and scope. Its JSON form is the contract `mandate graph --format json`
// prints.
type Graph struct {
	Tasks []GraphTask `json:"tasks"`
	Caps  []GraphCap  `json:"caps"`
}

// GraphTask is a task node.
type GraphTask struct {
	ID        string        `json:"id"`
	Parent    string        `json:"parent"`
	Principal string        `json:"principal"`
	Module    string        `json:"module"`
	State     TaskState     `json:"state"`
	Label     kindapi.Label `json:"label"`
	// Clearance is the most the task may hold; null when unbounded.
	Clearance *kindapi.Label `json:"clearance"`
	Denials   int            `json:"denials"`
	Error     string         `json:"error,omitempty"`
}

// GraphCap is a capability node.
type GraphCap struct {
	ID      string          `json:"id"`
	Kind    string          `json:"kind"`
	Name    string          `json:"name,omitempty"`
	Holder  string          `json:"holder"`
	Parent  string          `json:"parent"`
	Scope   json.RawMessage `json:"scope"`
	Revoked bool            `json:"revoked"`
	Dropped bool            `json:"dropped"`
	Audited bool            `json:"audited"`
	// When and ApproveWhen are the constraints this capability added
	// (its ancestors' apply too).
	When        []string `json:"when,omitempty"`
	ApproveWhen []string `json:"approve_when,omitempty"`
	// Rate is the rate set on this capability ("10/s"); its ancestors'
	// apply too.
	Rate string `json:"rate,omitempty"`
	// View is what the capability allows as its kind describes it, and
	// its own uses and budget.
	View CapView `json:"view"`
}

// CapView is the readable view of a capability: its kind's description of
// the scope (Kind.Describe), its own max_uses and budget with what its
// subtree used of them, and whether it crossed a task boundary (passed to
// its holder by the holder of its parent).
type CapView struct {
	Fields  []kindapi.Detail `json:"fields,omitempty"`
	MaxUses int64            `json:"max_uses,omitempty"`
	Uses    int64            `json:"uses,omitempty"`
	Budget  string           `json:"budget,omitempty"`
	Spent   string           `json:"spent,omitempty"`
	Passed  bool             `json:"passed,omitempty"`
}

// Graph returns a snapshot of every task and capability.
func (k *Kernel) Graph() Graph {
	k.mu.Lock()
	tasks := append([]*Task(nil), k.tasks...)
	caps := append([]*Cap(nil), k.caps...)
	k.mu.Unlock()
	g := Graph{Tasks: make([]GraphTask, 0, len(tasks)), Caps: make([]GraphCap, 0, len(caps))}
	for _, t := range tasks {
		t.mu.Lock()
		gt := GraphTask{
			ID: t.id, Principal: t.principal, Module: t.module,
			State: t.state, Label: t.label, Denials: t.denials, Clearance: t.clearance,
		}
		if t.parent != nil {
			gt.Parent = t.parent.id
		}
		if t.err != nil {
			gt.Error = t.err.Error()
		}
		t.mu.Unlock()
		g.Tasks = append(g.Tasks, gt)
	}
	for _, c := range caps {
		g.Caps = append(g.Caps, GraphCap{
			ID: c.id, Kind: c.kind.Name(), Name: c.name, Holder: c.holderID(), Parent: c.parentID(),
			Scope: scopeJSON(c.scope), Revoked: c.Revoked(), Dropped: c.dropped.Load(), Audited: c.audit,
			When: sources(c.cons.When), ApproveWhen: sources(c.cons.ApproveWhen),
			Rate: c.Rate().String(), View: c.view(),
		})
	}
	return g
}

// view describes c for the graph.
func (c *Cap) view() CapView {
	v := CapView{Fields: describeGuarded(c.kind, c.scope).Fields, Passed: c.passed}
	if u, ok := c.Usage(); ok {
		v.MaxUses, v.Uses = u.MaxUses, u.Uses
		if u.Budget > 0 {
			v.Budget, v.Spent = c.formatAmount(u.Budget), c.formatAmount(u.Spent)
		}
	}
	return v
}

// describeGuarded asks kind to describe s, turning a panic into an empty
// description.
func describeGuarded(kind kindapi.Kind, s kindapi.Scope) (d kindapi.Description) {
	defer func() {
		if r := recover(); r != nil {
			d = kindapi.Description{}
		}
	}()
	return kind.Describe(s)
}

func sources(cs []Constraint) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Source())
	}
	return out
}

type capDescription struct {
	ID      string          `json:"id"`
	Kind    string          `json:"kind"`
	Name    string          `json:"name,omitempty"`
	Ops     []string        `json:"ops"`
	Scope   json.RawMessage `json:"scope"`
	Revoked bool            `json:"revoked"`
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`{"error":"unencodable"}`)
	}
	return b
}
