package kernel

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox"
)

// Config configures a Kernel. Engine is required.
type Config struct {
	Engine sandbox.Engine
	Kinds  []kindapi.Kind
	// Logger is the root logger; tasks log through named children of it.
	Logger hclog.Logger
	// Auditor receives audit events; by default they go to the logger.
	Auditor Auditor
	// Approver answers uses that need a person's yes; by default DenyAll.
	Approver Approver
	// Constraints compiles `when` and `approve_when` expressions; without
	// it, capabilities cannot carry constraints.
	Constraints ConstraintCompiler
	// Modules finds the compiled module of a digest a task asks to spawn;
	// without it, tasks cannot spawn children.
	Modules ModuleResolver
	// MaxTasks bounds the tasks running at once; 0 means DefaultMaxTasks.
	MaxTasks int
	// Declassifiers names the registered kinds granted the privilege to
	// lower labels: the label their results carry is the one they compute,
	// not joined with the caller's, and every use of them is audited
	// whatever the manifest says. No other kind can lower a label.
	Declassifiers []string
	// Observer, when set, is told of every task's start and end.
	Observer Observer
	// Placer runs children whose spawn capability places them elsewhere
	// (a fleet node); without it, such a spawn is ENOTSUP.
	Placer Placer
	// Fence, when set, is asked right before every effect (a capability
	// call, a derivation, a spawn, once every other step of the pipeline
	// said yes and before the allow is audited): an error refuses the
	// operation, audited as a denial with EINTERNAL unless it carries an
	// errno of its own. A fleet node fences its runs with its lease: a
	// node whose lease on a run has expired (paused, cut off) performs
	// nothing more for it, even if it wakes up before it notices.
	Fence func() error
	// HostRegistered says Engine already has the kernel's host functions,
	// registered with RegisterHost: an engine shared by many kernels (a
	// host's runs), which accepts one registration. New then registers
	// nothing.
	HostRegistered bool
}

// Placer runs a child's module away from this kernel's engine while the
// kernel keeps its authority: Place returns a module whose Run executes
// mod's guest where placement says and hands every host call the guest
// makes to host (this kernel's own host functions, with the ctx Run was
// given), so each is mediated here exactly as a local call is. A refused
// placement (no such node, none free) is an error, and the spawn is
// refused before any effect.
type Placer interface {
	Place(ctx context.Context, placement string, mod sandbox.Module, host []sandbox.HostFunc) (sandbox.Module, error)
}

// registered is a kind as the kernel knows it: its static Info, read once,
// and the privileges granted at registration.
type registered struct {
	kind   kindapi.Kind
	info   kindapi.Info
	vars   []string
	lowers bool // may lower labels (Config.Declassifiers)
}

// Kernel runs tasks and mediates every call they make.
type Kernel struct {
	engine   sandbox.Engine
	kinds    map[string]*registered
	logger   hclog.Logger
	auditor  Auditor
	approver Approver
	compiler ConstraintCompiler
	modules  ModuleResolver
	maxTasks int
	observer Observer     // nil: none
	placer   Placer       // nil: children run here only
	fence    func() error // nil: none
	funcs    []sandbox.HostFunc
	live     atomic.Int64 // running tasks
	// seenUsed: a compiled constraint reads what tasks read (seen.go).
	seenUsed atomic.Bool

	mu       sync.Mutex
	tasks    []*Task // every task started; protected by mu
	caps     []*Cap  // every capability minted; protected by mu
	nextTask int     // protected by mu
	nextCap  int     // protected by mu
}

// New makes a kernel and registers the ABI's host functions with the
// engine, unless cfg.HostRegistered says they already are.
func New(cfg Config) (*Kernel, error) {
	if cfg.Engine == nil {
		return nil, fmt.Errorf("kernel: no engine")
	}
	k := &Kernel{
		engine:  cfg.Engine,
		kinds:   make(map[string]*registered),
		logger:  cfg.Logger,
		auditor: cfg.Auditor,
	}
	if k.logger == nil {
		k.logger = hclog.NewNullLogger()
	}
	k.compiler = cfg.Constraints
	k.modules = cfg.Modules
	k.maxTasks = cfg.MaxTasks
	k.observer = cfg.Observer
	k.placer = cfg.Placer
	k.fence = cfg.Fence
	if k.maxTasks <= 0 {
		k.maxTasks = DefaultMaxTasks
	}
	k.approver = cfg.Approver
	if k.approver == nil {
		k.approver = DenyAll
	}
	if k.auditor == nil {
		k.auditor = logAuditor{k.logger.Named("audit")}
	}
	for _, kind := range cfg.Kinds {
		if _, dup := k.kinds[kind.Name()]; dup {
			return nil, fmt.Errorf("kernel: kind %q registered twice", kind.Name())
		}
		info := kind.Info()
		if err := checkVarNames(kind.Name(), info.Vars); err != nil {
			return nil, err
		}
		r := &registered{kind: kind, info: info, vars: info.Vars}
		r.info.Ops = slices.Clone(info.Ops)
		if r.vars == nil {
			r.vars = []string{"args"}
		}
		k.kinds[kind.Name()] = r
	}
	for _, name := range cfg.Declassifiers {
		r, ok := k.kinds[name]
		if !ok {
			return nil, fmt.Errorf("kernel: declassifier %q is not a registered kind", name)
		}
		r.lowers = true
	}
	k.funcs = k.hostFuncs()
	if !cfg.HostRegistered {
		if err := cfg.Engine.Host(abi.ModuleName, k.funcs); err != nil {
			return nil, fmt.Errorf("kernel: registering host functions: %w", err)
		}
	}
	return k, nil
}

// RegisterHost registers the ABI's host functions with eng once, for
// every kernel that will run tasks on it (Config.HostRegistered). One
// registration serves them all because the host functions hold no
// kernel: each call finds its task, and through it the task's kernel, in
// the context the task's Module.Run was given (guard), so a call is
// mediated by the kernel of the task that made it.
func RegisterHost(eng sandbox.Engine) error {
	if err := eng.Host(abi.ModuleName, (*Kernel)(nil).hostFuncs()); err != nil {
		return fmt.Errorf("kernel: registering host functions: %w", err)
	}
	return nil
}

// Engine is the engine tasks run on.
func (k *Kernel) Engine() sandbox.Engine { return k.engine }

// Kind returns the registered kind with the given name.
func (k *Kernel) Kind(name string) (kindapi.Kind, bool) {
	r, ok := k.kinds[name]
	if !ok {
		return nil, false
	}
	return r.kind, true
}

// KindInfo returns the static description of the registered kind name.
func (k *Kernel) KindInfo(name string) (kindapi.Info, bool) {
	r, ok := k.kinds[name]
	if !ok {
		return kindapi.Info{}, false
	}
	info := r.info
	info.Ops = slices.Clone(info.Ops)
	info.Vars = slices.Clone(r.vars)
	return info, true
}

// Kinds lists the registered kinds' names, sorted.
func (k *Kernel) Kinds() []string {
	names := make([]string, 0, len(k.kinds))
	for n := range k.kinds {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Grant mints a root scope of the named kind from a manifest grant.
func (k *Kernel) Grant(kind string, g kindapi.GrantContext, spec []byte) (kindapi.Scope, error) {
	kd, ok := k.kinds[kind]
	if !ok {
		return nil, fmt.Errorf("unknown capability kind %q (known: %v)", kind, k.Kinds())
	}
	return kd.kind.Grant(g, spec)
}

// Tasks returns every task started so far, in the order they started (the
// root first), ended ones included: their results and output stay
// readable.
func (k *Kernel) Tasks() []*Task {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]*Task(nil), k.tasks...)
}
