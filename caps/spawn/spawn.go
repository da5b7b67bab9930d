// Package spawn is the spawn capability kind, Kind("spawn"): the right to
// start child tasks from some modules, within a depth, a number of
// children, and memory and time bounds. The kernel does the spawning
// (task_spawn in the ABI); this package is the policy: what the scope
// allows and how it narrows.
//
// A manifest grants one (modules by digest; the CLI resolves module paths):
//
//	cap "spawn" "children" {
//	  modules      = ["sha256:4f1c…"]
//	  max_depth    = 1
//	  max_children = 4
//	  max_memory   = "32MiB"
//	  max_timeout  = "20s"
//	}
//
// # Grant spec
//
//	field         type      default   meaning
//	modules       []string  required  module digests a child may run ("sha256:<64 hex>"), at most 64
//	max_depth     int       1         deepest a child may be (a root task is 0), at most kindapi.MaxSpawnDepth
//	max_children  int       8         children one task may spawn, at most 1024
//	max_memory    size      0         most memory per child; 0: the parent's limit
//	max_timeout   duration  0         most time per child; 0: the parent's time left
//	placement     string    "local"   where a child runs: "local" (this kernel's machine), "fleet" (any
//	                                  other node of the run's fleet), or "node:NAME" (that node)
//
// A child placed on another node runs its guest there, but every host call
// it makes is forwarded to this kernel and mediated here, so revocation,
// budgets, labels and the audit log are exactly as for a local child (see
// package sandbox/forward and docs/fleet.md). Placement is not narrowed: a
// narrowing request may repeat it but not change it.
//
// A narrowing request has the same fields, all optional: fewer modules,
// smaller numbers, smaller bounds (a bound of 0 in the parent means "the
// parent's own limits" and may be narrowed to any positive value). Wider is
// EDENIED; malformed is EINVAL. Whatever the scope says, the kernel never
// gives a child more memory than its parent has or more time than its
// parent has left, and never runs more than its MaxTasks tasks at once.
package spawn

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox"
)

// Bounds on grants.
const (
	MaxModules     = 64
	MaxChildrenCap = 1024
)

// Kind is the spawn kind.
type Kind struct{}

var _ kindapi.Kind = (*Kind)(nil)

// New returns the spawn kind.
func New() *Kind { return &Kind{} }

// Name implements kindapi.Kind.
func (*Kind) Name() string { return "spawn" }

// Info implements kindapi.Kind: a spawn capability has one operation,
// kindapi.OpSpawn, used through task_spawn, not cap_call. Constraints see
// the spawn request as "args" (module, caps, memory, timeout...).
func (*Kind) Info() kindapi.Info { return kindapi.Info{Ops: []string{kindapi.OpSpawn}} }

// Prepare implements kindapi.Kind: it decodes the spawn request, checks the
// module against the scope and gives the kernel the child's bounds. The
// kernel makes the child.
func (*Kind) Prepare(call *kindapi.Call) (kindapi.Op, error) {
	s, err := kindapi.ScopeAs[*Scope](call.Scope, "spawn")
	if err != nil {
		return kindapi.Op{}, err
	}
	if call.Op != kindapi.OpSpawn {
		return kindapi.Op{}, kindapi.Errorf(abi.ENOTSUP, "spawn: no operation %q; use task_spawn", call.Op)
	}
	r, err := abi.DecodeSpawnRequest(call.Args)
	if err != nil {
		return kindapi.Op{}, kindapi.Errorf(abi.EINVAL, "spawn: %v", err)
	}
	if !s.AllowsModule(r.Module) {
		return kindapi.Op{}, kindapi.Errorf(abi.EDENIED, "spawn: module %s is not allowed", r.Module)
	}
	names := make([]string, 0, len(r.Caps))
	for _, c := range r.Caps {
		names = append(names, c.Name)
	}
	// The whole request (narrowings, limits, clearance) and the input's
	// content digest: an approval is bound to all of it.
	details := []kindapi.Detail{{Name: "module", Value: r.Module}, {Name: "capabilities passed", Value: strings.Join(names, ", ")},
		{Name: "request", Value: string(call.Args)}}
	if r.Input != 0 {
		if b, err := call.Blob(r.Input); err == nil {
			details = append(details, kindapi.Detail{Name: "input", Value: fmt.Sprintf("%d bytes, sha256:%x", b.Len(), sha256.Sum256(b.Bytes()))})
		}
	}
	return kindapi.Op{
		Spawn: &kindapi.SpawnBounds{Module: r.Module, MaxDepth: s.maxDepth, MaxChildren: s.maxChildren,
			MaxMemory: s.maxMemory, MaxTimeout: s.maxTimeout, Placement: s.placement},
		Show: func() kindapi.Preview {
			return kindapi.Preview{
				Summary: "start a child task running " + r.Module,
				Details: details,
			}
		},
	}, nil
}

// Describe implements kindapi.Kind.
func (*Kind) Describe(sc kindapi.Scope) kindapi.Description {
	s, err := kindapi.ScopeAs[*Scope](sc, "spawn")
	if err != nil {
		return kindapi.Description{}
	}
	d := kindapi.Description{Fields: []kindapi.Detail{
		{Name: "modules", Value: strings.Join(s.modules, ", ")},
		{Name: "max_depth", Value: fmt.Sprint(s.maxDepth)},
		{Name: "max_children", Value: fmt.Sprint(s.maxChildren)},
	}}
	if s.maxMemory > 0 {
		d.Fields = append(d.Fields, kindapi.Detail{Name: "max_memory", Value: kindapi.FormatBytes(int64(s.maxMemory))})
	}
	if s.maxTimeout > 0 {
		d.Fields = append(d.Fields, kindapi.Detail{Name: "max_timeout", Value: s.maxTimeout.String()})
	}
	if s.placement != "" {
		d.Fields = append(d.Fields, kindapi.Detail{Name: "placement", Value: s.placement})
	}
	d.Reaches = slices.Clone(s.modules)
	// A child holds only what its parent passes, each checked for itself.
	d.Repeatable = true
	return d
}

// Scope is what a spawn capability allows. Immutable.
type Scope struct {
	modules     []string
	maxDepth    int
	maxChildren int
	maxMemory   uint64
	maxTimeout  time.Duration
	placement   string // "" is local
}

// AllowsModule reports whether a child may run the module with digest d.
func (s *Scope) AllowsModule(d string) bool { return slices.Contains(s.modules, d) }

// MaxDepth is the scope's MaxDepth bound.
func (s *Scope) MaxDepth() int { return s.maxDepth }

// MaxChildren is the scope's MaxChildren bound.
func (s *Scope) MaxChildren() int { return s.maxChildren }

// MaxMemory is the scope's MaxMemory bound.
func (s *Scope) MaxMemory() uint64 { return s.maxMemory }

// MaxTimeout is the scope's MaxTimeout bound.
func (s *Scope) MaxTimeout() time.Duration { return s.maxTimeout }

// Placement is where a child runs: "" (local), "fleet" or "node:NAME".
func (s *Scope) Placement() string { return s.placement }

// Modules returns a copy of the allowed digests.
func (s *Scope) Modules() []string { return slices.Clone(s.modules) }

type scopeJSON struct {
	Modules     []string `json:"modules"`
	MaxDepth    int      `json:"max_depth"`
	MaxChildren int      `json:"max_children"`
	MaxMemory   uint64   `json:"max_memory"`
	MaxTimeout  string   `json:"max_timeout"`
	Placement   string   `json:"placement,omitempty"`
}

// MarshalJSON implements kindapi.Scope.
func (s *Scope) MarshalJSON() ([]byte, error) {
	t := ""
	if s.maxTimeout > 0 {
		t = s.maxTimeout.String()
	}
	return json.Marshal(scopeJSON{s.modules, s.maxDepth, s.maxChildren, s.maxMemory, t, s.placement})
}

// bound reports whether child bound c is within parent bound p, where 0
// means "no bound beyond the parent's own limits".
func within(c, p uint64) bool { return p == 0 || (c != 0 && c <= p) }

// Contains implements kindapi.Scope.
func (s *Scope) Contains(o kindapi.Scope) bool {
	t, ok := o.(*Scope)
	if !ok {
		return false
	}
	for _, m := range t.modules {
		if !s.AllowsModule(m) {
			return false
		}
	}
	return t.placement == s.placement && t.maxDepth <= s.maxDepth && t.maxChildren <= s.maxChildren &&
		within(t.maxMemory, s.maxMemory) && within(uint64(t.maxTimeout), uint64(s.maxTimeout))
}

type spec struct {
	Modules     []string  `json:"modules"`
	MaxDepth    *int      `json:"max_depth"`
	MaxChildren *int      `json:"max_children"`
	MaxMemory   *abi.Size `json:"max_memory"`
	MaxTimeout  *string   `json:"max_timeout"`
	Placement   *string   `json:"placement"`
}

func decode(b []byte) (spec, error) {
	var s spec
	if err := abi.DecodeJSON(b, &s); err != nil {
		return spec{}, err
	}
	return s, nil
}

func canonModules(ms []string) ([]string, error) {
	if len(ms) == 0 || len(ms) > MaxModules {
		return nil, fmt.Errorf("must list 1 to %d module digests", MaxModules)
	}
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		m = strings.ToLower(strings.TrimSpace(m))
		if !sandbox.IsDigest(m) {
			return nil, fmt.Errorf("%q is not a module digest (sha256:<64 hex>)", m)
		}
		out = append(out, m)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Grant implements kindapi.Kind.
func (*Kind) Grant(_ kindapi.GrantContext, b []byte) (kindapi.Scope, error) {
	sp, err := decode(b)
	if err != nil {
		return nil, &kindapi.FieldError{Field: "modules", Msg: err.Error()}
	}
	s := &Scope{maxDepth: 1, maxChildren: 8}
	if s.modules, err = canonModules(sp.Modules); err != nil {
		return nil, &kindapi.FieldError{Field: "modules", Msg: err.Error()}
	}
	if sp.MaxDepth != nil {
		if *sp.MaxDepth < 1 || *sp.MaxDepth > kindapi.MaxSpawnDepth {
			return nil, &kindapi.FieldError{Field: "max_depth", Msg: fmt.Sprintf("must be 1..%d", kindapi.MaxSpawnDepth)}
		}
		s.maxDepth = *sp.MaxDepth
	}
	if sp.MaxChildren != nil {
		if *sp.MaxChildren < 1 || *sp.MaxChildren > MaxChildrenCap {
			return nil, &kindapi.FieldError{Field: "max_children", Msg: fmt.Sprintf("must be 1..%d", MaxChildrenCap)}
		}
		s.maxChildren = *sp.MaxChildren
	}
	if sp.MaxMemory != nil {
		if *sp.MaxMemory < 0 {
			return nil, &kindapi.FieldError{Field: "max_memory", Msg: "must not be negative"}
		}
		s.maxMemory = uint64(*sp.MaxMemory)
	}
	if sp.MaxTimeout != nil {
		d, err := time.ParseDuration(*sp.MaxTimeout)
		if err != nil || d < 0 {
			return nil, &kindapi.FieldError{Field: "max_timeout", Msg: "must be a duration such as \"20s\""}
		}
		s.maxTimeout = d
	}
	if sp.Placement != nil {
		pl, err := canonPlacement(*sp.Placement)
		if err != nil {
			return nil, &kindapi.FieldError{Field: "placement", Msg: err.Error()}
		}
		s.placement = pl
	}
	return s, nil
}

// maxNodeName bounds the node name of a "node:NAME" placement.
const maxNodeName = 128

// canonPlacement checks a placement and returns its stored form ("" for
// local).
func canonPlacement(p string) (string, error) {
	switch {
	case p == "local":
		return "", nil
	case p == "fleet":
		return p, nil
	case strings.HasPrefix(p, "node:"):
		name := p[len("node:"):]
		if name == "" || len(name) > maxNodeName {
			return "", fmt.Errorf("node name must be 1 to %d characters", maxNodeName)
		}
		for _, c := range name {
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("node name %q may hold only letters, digits, - and _", name)
			}
		}
		return p, nil
	}
	return "", fmt.Errorf("%q is not a placement: \"local\", \"fleet\" or \"node:NAME\"", p)
}

// Narrow implements kindapi.Kind.
func (*Kind) Narrow(parent kindapi.Scope, b []byte) (kindapi.Scope, error) {
	p, err := kindapi.ScopeAs[*Scope](parent, "spawn")
	if err != nil {
		return nil, err
	}
	sp, err := decode(b)
	if err != nil {
		return nil, kindapi.Errorf(abi.EINVAL, "spawn: narrow: %v", err)
	}
	c := *p
	c.modules = slices.Clone(p.modules)
	var widen []string
	if sp.Modules != nil {
		ms, err := canonModules(sp.Modules)
		if err != nil {
			return nil, kindapi.Errorf(abi.EINVAL, "spawn: narrow: modules: %v", err)
		}
		for _, m := range ms {
			if !p.AllowsModule(m) {
				widen = append(widen, "module "+m+" not allowed")
			}
		}
		c.modules = ms
	}
	if v := sp.MaxDepth; v != nil {
		if *v < 1 {
			return nil, kindapi.Errorf(abi.EINVAL, "spawn: narrow: max_depth must be positive")
		}
		if *v > p.maxDepth {
			widen = append(widen, fmt.Sprintf("max_depth %d exceeds %d", *v, p.maxDepth))
		}
		c.maxDepth = *v
	}
	if v := sp.MaxChildren; v != nil {
		if *v < 1 {
			return nil, kindapi.Errorf(abi.EINVAL, "spawn: narrow: max_children must be positive")
		}
		if *v > p.maxChildren {
			widen = append(widen, fmt.Sprintf("max_children %d exceeds %d", *v, p.maxChildren))
		}
		c.maxChildren = *v
	}
	if v := sp.MaxMemory; v != nil {
		if *v <= 0 {
			return nil, kindapi.Errorf(abi.EINVAL, "spawn: narrow: max_memory must be positive")
		}
		if !within(uint64(*v), p.maxMemory) {
			widen = append(widen, fmt.Sprintf("max_memory %d exceeds %d", *v, p.maxMemory))
		}
		c.maxMemory = uint64(*v)
	}
	if v := sp.MaxTimeout; v != nil {
		d, err := time.ParseDuration(*v)
		if err != nil || d <= 0 {
			return nil, kindapi.Errorf(abi.EINVAL, "spawn: narrow: max_timeout must be a positive duration")
		}
		if !within(uint64(d), uint64(p.maxTimeout)) {
			widen = append(widen, fmt.Sprintf("max_timeout %s exceeds %s", d, p.maxTimeout))
		}
		c.maxTimeout = d
	}
	if v := sp.Placement; v != nil {
		pl, err := canonPlacement(*v)
		if err != nil {
			return nil, kindapi.Errorf(abi.EINVAL, "spawn: narrow: placement: %v", err)
		}
		if pl != p.placement {
			widen = append(widen, fmt.Sprintf("placement %q is not the capability's %q", *v, placementName(p.placement)))
		}
	}
	if len(widen) > 0 {
		return nil, kindapi.Errorf(abi.EDENIED, "spawn: narrowing would widen the capability: %s", strings.Join(widen, "; "))
	}
	return &c, nil
}

func placementName(p string) string {
	if p == "" {
		return "local"
	}
	return p
}
