package kernel

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// Kind is a kind of capability: net, data, pay, spawn... Each lives in its
// own package under caps/ and is registered with the kernel by name. A kind
// never sees handles or other tasks: the kernel resolves handles, checks
// revocation and rights, and hands the kind a Call. Narrow and Invoke only
// ever get scopes the kind's own Grant and Narrow made; ScopeAs recovers
// the concrete type (EINTERNAL otherwise), and AsScope keeps a nil one
// returned with an error from becoming a non-nil Scope.
type Kind interface {
	// Name is the kind's short name, e.g. "net".
	Name() string
	// Ops lists the operations Invoke accepts.
	Ops() []string
	// Grant mints a root scope from a manifest grant: spec is the cap
	// block's body as a JSON object. Errors should be *FieldError when
	// they concern one field, so the manifest can point at its line.
	Grant(g GrantContext, spec []byte) (Scope, error)
	// Narrow returns a scope within parent as the request (a JSON object,
	// see ABI.md for each kind) asks, or an error: any request that would
	// widen parent is refused with an error matching ErrDenied, never
	// silently clamped.
	Narrow(parent Scope, req []byte) (Scope, error)
	// Invoke performs the operation and returns its result, or nil for
	// none. Errors should be *Error values (see Errorf); any other error
	// reaches the guest as EINTERNAL. The kernel recycles the Call: a kind
	// must not keep it, or its Args, after Invoke returns (Result.Data may
	// be Args itself, which the kernel then owns).
	Invoke(ctx context.Context, call *Call) (*Result, error)
}

// Scope is what a capability allows. A scope is immutable once minted;
// its JSON form (for the graph, the guest's cap_describe and logs) never
// contains secrets.
type Scope interface {
	json.Marshaler
	// Contains reports whether every use other allows is allowed by the
	// receiver. The kernel checks it after every Narrow, as a second line
	// behind the kind's own narrowing.
	Contains(other Scope) bool
}

// ScopeAs returns s as the kind's own scope type T. A kind is only ever
// handed scopes its own Grant and Narrow made, so a nil scope or one of
// another type is a kernel bug, reported as EINTERNAL naming the kind; it
// must never panic the kind.
func ScopeAs[T interface {
	comparable
	Scope
}](s Scope, kind string) (T, error) {
	var zero T
	t, ok := s.(T)
	if !ok || t == zero {
		return zero, Errorf(abi.EINTERNAL, "%s: scope is %T, not %T", kind, s, zero)
	}
	return t, nil
}

// AsScope returns a kind's concrete scope as a Scope, or a nil Scope with
// err, so a nil *T returned beside an error never becomes a non-nil Scope.
// It lets a kind write Grant and Narrow as return kernel.AsScope(grant(spec)).
func AsScope[T Scope](s T, err error) (Scope, error) {
	if err != nil {
		return nil, err
	}
	return s, nil
}

// GrantContext is what a kind may consult when minting a root scope: where
// the manifest lives (relative file names resolve against it) and the host
// environment (for secrets named in the manifest).
type GrantContext struct {
	// Dir is the manifest's directory.
	Dir string
	// LookupEnv reads the host environment; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// Getenv looks a variable up in the host environment.
func (g GrantContext) Getenv(name string) (string, bool) {
	if g.LookupEnv != nil {
		return g.LookupEnv(name)
	}
	return os.LookupEnv(name)
}

// ReadFile reads a file named in the manifest, relative to its directory.
func (g GrantContext) ReadFile(name string) ([]byte, error) {
	if !filepath.IsAbs(name) && g.Dir != "" {
		name = filepath.Join(g.Dir, name)
	}
	return os.ReadFile(name)
}

// FieldError is a grant error about one field of a cap block.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Prechecker is implemented by a kind that can tell, without acting,
// whether its scope allows a call. The kernel asks before it evaluates
// constraints and asks for approvals, so a person is never asked to approve
// a call the kind would then refuse. Invoke must still check everything.
type Prechecker interface {
	Precheck(call *Call) error
}

// TaskInfo identifies the task making a call, for kinds whose effect
// depends on who acts (the principal) and for their logs.
type TaskInfo struct {
	ID        string
	Principal string
	Module    string
}

// Call is one operation on a capability, as the kernel hands it to a kind.
type Call struct {
	Op    string
	Args  []byte // the guest's argument document, copied out of its memory
	Scope Scope
	Task  TaskInfo
	// Logger is the calling task's logger.
	Logger hclog.Logger

	blob    func(abi.Handle) (*Blob, error)
	task    *Task // the calling task and the capability, for Approve
	cap     *Cap
	approve func(ctx context.Context, summary string, details map[string]any) error // tests only
	spliced []*Blob
}

// Blob resolves a blob handle named in the call's arguments, in the calling
// task's table only. The kernel records every blob a kind splices into an
// effect, so flow checks can cover it.
func (c *Call) Blob(h abi.Handle) (*Blob, error) {
	if c.blob == nil {
		return nil, ErrBadHandle
	}
	b, err := c.blob(h)
	if err != nil {
		return nil, err
	}
	if err := checkSpliced(c.cap, b); err != nil {
		return nil, err
	}
	c.spliced = append(c.spliced, b)
	return b, nil
}

// TaskLabel is the calling task's label at the call: what everything it
// writes carries. A kind that stores data (a sink with per-item labels)
// checks that it may flow there.
func (c *Call) TaskLabel() Label {
	if c.task == nil {
		return Label{}
	}
	return c.task.Label()
}

// Spliced returns the blobs resolved through Blob so far.
func (c *Call) Spliced() []*Blob { return append([]*Blob(nil), c.spliced...) }

// Result is what an operation produced. The kernel turns Data into a blob
// labelled Label joined with the calling task's label and the labels of
// every blob the kind read through Call.Blob (declassify's result alone
// keeps exactly Label).
type Result struct {
	Data  []byte
	Label Label
}
