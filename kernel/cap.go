package kernel

import (
	"encoding/json"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"slices"
	"sync"
	"sync/atomic"
)

// Cap is a capability: a kind, an immutable scope, and its place in the
// derivation tree. Tasks name caps through handles in their CapTable; the
// same Cap is never in two tasks' tables (passing a capability to a child
// derives a new node held by the child), so the graph says who holds what.
type Cap struct {
	id     string
	kind   kindapi.Kind
	reg    *registered
	scope  kindapi.Scope
	name   string // the manifest's name for a root grant; "" for derived
	parent *Cap
	holder *Task
	audit  bool // decisions are written to the audit log before effect
	cons   Constraints
	rate   *bucket    // nil: no rate of its own (its ancestors' still apply)
	allow  *allowance // nil: no max_uses or budget of its own
	hist   *history   // nil: no constraint of its own reads uses (history.go)
	passed bool       // minted for a child task by task_spawn
	// chain says which bounds c or an ancestor carries, so a call on a
	// capability without them walks no chain; set by link, then immutable.
	chain chainFlags

	revoked atomic.Bool
	dropped atomic.Bool

	// approveMints: approvals on c and what is derived from it are
	// remembered (GrantSpec.ApproveMints); approved holds the effects a
	// person approved on c itself, by digest.
	approveMints bool
	approvedMu   sync.Mutex
	approved     map[string]struct{}
	// approvePlans: effects on c and what is derived from it may be
	// items of a plan (GrantSpec.ApprovePlans). Immutable.
	approvePlans bool

	// children is protected by Kernel.mu.
	children []*Cap
}

// ID is unique within the kernel, e.g. "c3".
func (c *Cap) ID() string { return c.id }

// Kind is the capability's kind.
func (c *Cap) Kind() kindapi.Kind { return c.kind }

// Scope is the capability's scope.
func (c *Cap) Scope() kindapi.Scope { return c.scope }

// Name is the manifest name of a root grant, empty for derived caps.
func (c *Cap) Name() string { return c.name }

// Parent is the capability this one was derived from, nil for a root.
func (c *Cap) Parent() *Cap { return c.parent }

// Revoked reports whether the capability or an ancestor was revoked.
func (c *Cap) Revoked() bool { return c.revoked.Load() }

// Constraints returns the constraints c itself carries (its ancestors'
// apply too).
func (c *Cap) Constraints() Constraints {
	return Constraints{When: slices.Clone(c.cons.When), ApproveWhen: slices.Clone(c.cons.ApproveWhen)}
}

// Rate is the rate set on c itself; the rates of its ancestors apply too.
func (c *Cap) Rate() Rate {
	if c.rate == nil {
		return Rate{}
	}
	return c.rate.rate
}

// Audited reports whether decisions on c go to the audit log.
func (c *Cap) Audited() bool { return c.audit }

// displayName is the cap's manifest name, or its id for derived caps.
func (c *Cap) displayName() string {
	for x := c; x != nil; x = x.parent {
		if x.name != "" {
			return x.name
		}
	}
	return c.id
}

func (c *Cap) holderID() string {
	if c.holder == nil {
		return ""
	}
	return c.holder.id
}

func (c *Cap) parentID() string {
	if c.parent == nil {
		return ""
	}
	return c.parent.id
}

func scopeJSON(s kindapi.Scope) json.RawMessage {
	b, err := s.MarshalJSON()
	if err != nil || !json.Valid(b) {
		b, _ = json.Marshal(map[string]string{"error": "scope not describable"})
	}
	return b
}

// chainFlags are the bounds some capability of a chain carries.
type chainFlags uint8

const (
	chainRate        chainFlags = 1 << iota // a rate
	chainAllowance                          // max_uses or a budget
	chainConstraints                        // when or approve_when
	chainHistory                            // a history (history.go)
	chainNow                                // a constraint reading now
)

// flags computes c's chain flags from its own bounds and its parent's.
func (c *Cap) flags() chainFlags {
	var f chainFlags
	if c.parent != nil {
		f = c.parent.chain
	}
	if c.rate != nil {
		f |= chainRate
	}
	if c.allow != nil {
		f |= chainAllowance
	}
	if !c.cons.empty() {
		f |= chainConstraints
	}
	if c.hist != nil {
		f |= chainHistory
	}
	if c.cons.References(NowVar) {
		f |= chainNow
	}
	return f
}
