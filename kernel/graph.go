package kernel

import (
	"encoding/json"
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
	ID        string    `json:"id"`
	Parent    string    `json:"parent"`
	Principal string    `json:"principal"`
	Module    string    `json:"module"`
	State     TaskState `json:"state"`
	Label     Label     `json:"label"`
	// Clearance is the most the task may hold; null when unbounded.
	Clearance *Label `json:"clearance"`
	Denials   int    `json:"denials"`
	Error     string `json:"error,omitempty"`
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
			Rate: c.Rate().String(),
		})
	}
	return g
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
