// Package kindapi is the kind contract: what a capability kind (caps/net,
// caps/pay, ...) implements and uses, in a package of its own so that kinds
// import it instead of the whole kernel. The kernel (package kernel)
// imports it; it imports neither the kernel nor any kind.
//
//	type Kind struct{}
//
//	func (*Kind) Name() string            { return "echo" }
//	func (*Kind) Info() kindapi.Info      { return kindapi.Info{Ops: []string{"echo"}} }
//	func (*Kind) Grant(kindapi.GrantContext, []byte) (kindapi.Scope, error) { ... }
//	func (*Kind) Narrow(kindapi.Scope, []byte) (kindapi.Scope, error)       { ... }
//	func (*Kind) Prepare(c *kindapi.Call) (kindapi.Op, error) {
//		args := c.Args // checked here, with no side effect
//		return kindapi.Op{Effect: func(context.Context) (*kindapi.Result, error) {
//			return &kindapi.Result{Data: args}, nil
//		}}, nil
//	}
//	func (*Kind) Describe(kindapi.Scope) kindapi.Description { ... }
//
// The kernel decides on what Prepare returns (docs/ARCHITECTURE.md, "the
// mediation pipeline") and runs the Effect only when every check passed.
// Lowering labels is a privilege the kernel grants at registration, not
// anything a kind can declare here.
package kindapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// Kind is a kind of capability: net, data, pay, spawn... Each lives in its
// own package under caps/ and is registered with the kernel by name. A kind
// never sees handles or other tasks: the kernel resolves handles, checks
// revocation, and hands the kind a Call to prepare. Narrow and Prepare only
// ever get scopes the kind's own Grant and Narrow made; ScopeAs recovers
// the concrete type (EINTERNAL otherwise), and AsScope keeps a nil one
// returned with an error from becoming a non-nil Scope.
//
// A kind decides nothing on its own and acts only when the kernel says so:
// Prepare checks a call against the scope and describes it, and the kernel
// runs every call through one pipeline (kernel/mediator.go, docs/ARCHITECTURE.md, "the mediation pipeline")
// before it runs the prepared Effect.
type Kind interface {
	// Name is the kind's short name, e.g. "net".
	Name() string
	// Info is the kind's static description: its operations, the
	// variables its constraints see, the unit of its amounts. The kernel
	// reads it once, at registration.
	Info() Info
	// Grant mints a root scope from a manifest grant: spec is the cap
	// block's body as a JSON object, without the kernel's own attributes
	// (audit, rate, when, approve_when, max_uses, budget). Errors should
	// be *FieldError when they concern one field, so the manifest can
	// point at its line.
	Grant(g GrantContext, spec []byte) (Scope, error)
	// Narrow returns a scope within parent as the request (a JSON object,
	// see ABI.md for each kind) asks, or an error: any request that would
	// widen parent is refused with an error matching ErrDenied, never
	// silently clamped. It has no side effect: the kernel may still refuse
	// the derivation after it.
	Narrow(parent Scope, req []byte) (Scope, error)
	// Prepare decodes the call's arguments once, splices the blobs they
	// name (Call.Blob), checks everything the scope decides (method, path,
	// payee, expiry...) and returns what the kernel decides on, with the
	// Effect that performs the call. It must have no side effect: no
	// request, no write, no debit. Errors should be *Error values (see
	// Errorf); any other error reaches the guest as EINTERNAL. The kernel
	// recycles the Call: neither the Op nor its Effect may keep it, or its
	// Args, past the Effect's return (Result.Data may be Args itself, which
	// the kernel then owns).
	Prepare(call *Call) (Op, error)
	// Describe is the static view of a scope, for mandate check, mandate
	// graph and the guest's cap_describe: every field of the grant that
	// limits it, in readable units, without defaults that were not set.
	Describe(s Scope) Description
}

// Info is what a kind is, independent of any grant.
type Info struct {
	// Ops lists the operations Prepare accepts. A spawn kind has the one
	// operation OpSpawn, reached through task_spawn instead of cap_call.
	Ops []string
	// Vars names the variables `when` and `approve_when` see; nil means
	// one, "args", the call's argument document decoded as JSON.
	Vars []string
	// Amounts, when set, says the kind's calls carry an amount (Op.Amount)
	// and how a `budget` on its grants is read and shown.
	Amounts AmountUnit
}

// AmountUnit reads and writes the amounts of a kind whose calls carry one
// (a charge's minor units), for a given scope (its currency).
type AmountUnit interface {
	ParseAmount(s Scope, text string) (int64, error)
	FormatAmount(s Scope, n int64) string
}

// OpSpawn is the operation task_spawn prepares on a spawn capability.
const OpSpawn = "spawn"

// Op is a prepared call: everything the kernel decides on, and the effect
// it runs when every check has passed. The zero Op is a call that sends
// nothing out, carries no amount, needs nothing, and does nothing.
type Op struct {
	// Sink is where the call sends data, nil when it sends nothing out:
	// the calling task's label and every blob spliced through Call.Blob
	// must flow to it (laws 6 and 7).
	Sink *Sink
	// Vars computes the values `when` and `approve_when` see, as the
	// kind's Info.Vars names them; nil means {"args": the decoded
	// arguments}. The kernel calls it only when the capability carries
	// constraints.
	Vars func() (map[string]any, error)
	// Show describes the effect for a person: what an approver is asked
	// and what the audit log records of an approval. Called only when an
	// approval is needed; nil shows the operation and the argument size.
	Show func() Preview
	// NeedsApproval is the kind's own reason to ask a person before the
	// effect, e.g. "above approve_above 500.00 USD"; "" for none.
	NeedsApproval string
	// Amount is what the call spends in the kind's unit (Info.Amounts),
	// debited from every budget on the capability's chain.
	Amount int64
	// Free marks a call that uses nothing of max_uses or budget (an
	// idempotent replay of a charge already made).
	Free bool
	// NoResult marks a call that never returns a handle, so no table slot
	// is reserved for it.
	NoResult bool
	// Spawn is what a spawn capability allows this child (OpSpawn only).
	Spawn *SpawnBounds
	// Reserve, when set, takes what the kind itself must hold while the
	// call is decided (pay: its idempotency key), at the kernel's reserve
	// step, before the uses and budget: release gives it back if the call
	// is then refused (the kernel calls it at most once, and never after
	// the effect ran); free reports that the call turned out to spend
	// nothing (the key is being charged by another call, whose receipt
	// this one will replay).
	Reserve func() (release func(), free bool, err error)
	// Effect performs the call. nil is an effect that does nothing.
	Effect func(ctx context.Context) (*Result, error)
	// Account, set only on a call that changes something outside the
	// kernel (a net request other than GET, HEAD or OPTIONS; a charge),
	// says what the effect was, as the calling task asked for it: the
	// kernel lists it with the run's effects, beside the task's result,
	// so a person reads what was done and not only what the model said
	// (Result.Outcome says how it came out). nil: not an effect to list.
	// The kernel calls it once the effect ran, or failed in a way that
	// leaves it possible that it happened (Performed), never on a call it
	// refused; an unaudited call without it costs nothing more.
	Account func() Account
	// Provenance says, for the values of the call that were spliced from
	// a part of a blob (Call.BlobPart), where each came from, keyed by its
	// place among the kind's variables ("request.body.recipient"):
	// constraints read it with spliced() and from().
	Provenance map[string]Source
}

// Account is a one-line account of an effect, in the calling task's
// terms: what the task wrote, never what the kernel spliced in for it
// (each spliced blob is "[spliced N]": the task never read its bytes,
// which may be a passport). The kernel records it in the audit log (the
// "outcome" entry's effect), one line, printable, cut past MaxAccount
// bytes, and lists it with the run's effects.
type Account struct {
	// Action is what was done, without the data the task wrote into it:
	// "POST https://book.example/book", "charge 390.00 EUR to
	// airline.example".
	Action string
	// Written is what the task wrote into the effect, beginning with its
	// separator from Action: a URL's query and a request body (`?q=1
	// {"listing_id":"L1","guest":[spliced 0]}`, or ` {...}`); "" for
	// none. When the task's label at the call has confidentiality tags,
	// the audit log (which is copied to operators) records in its place
	// " [N bytes the task wrote, labelled TAGS]".
	Written string
}

// MaxAccount bounds the account of an effect (Action and Written) and
// its outcome as the audit log records them: anything longer is cut and
// marked.
const MaxAccount = 300

// PrintableMax is Printable cut past limit bytes instead of MaxShown.
func PrintableMax(s string, limit int) string {
	p, _ := escape(s, limit, false)
	return p
}

// Sink is a destination of data and what it is cleared for.
type Sink struct {
	// Clearance is the highest label data sent there may carry.
	Clearance Label
	// RefusesTainted refuses any data with an integrity taint (a net
	// capability with accepts_untrusted = false).
	RefusesTainted bool
	// RefusedTaints refuses data carrying any taint they match (a net
	// capability's refuses_taints = ["web:*", "bank:tx"]); see
	// RefusedTaint for the one rule both make.
	RefusedTaints TaintPatterns
}

// Preview is what a person is shown before approving a call: one line a
// person can judge ("charge 10.00 USD to attacker.example") and the
// details it is made of (method, URL, payee, amount...), bounded and
// printable.
type Preview struct {
	Summary string
	Details []Detail
}

// Detail is one named value of a Preview.
type Detail struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// MaxSpawnDepth bounds how deep tasks nest whatever a spawn capability
// says: a root task is depth 0.
const MaxSpawnDepth = 8

// SpawnBounds is what a spawn capability allows one child.
type SpawnBounds struct {
	Module      string // the digest asked for, allowed by the scope
	MaxDepth    int
	MaxChildren int
	MaxMemory   uint64        // 0: the parent's own limit
	MaxTimeout  time.Duration // 0: the parent's remaining time
	// Placement is where the child runs: "" on this kernel's machine,
	// else a placement the kernel's Placer understands ("fleet",
	// "node:NAME").
	Placement string
}

// Description is the static view of a scope a kind gives.
type Description struct {
	// Fields are the scope's limits in the order the kind documents
	// them, each in readable units ("800.00 USD", "GET, POST").
	Fields []Detail
	// Sink is the clearance of what the scope sends out, nil when it
	// sends nothing.
	Sink *Sink
	// Label is what the capability's results carry, beyond the caller's
	// label (a net origin's taint, a data source's tags).
	Label Label
	// Repeatable reports that every effect the scope allows may happen
	// again without a second effect in the world: safe methods, reads,
	// pure computations, or charges whose idempotency keys derive from the
	// run's seed (GrantContext.Seed), so a run repeated under the same seed
	// makes each charge once. A fleet runs a task again after its node is
	// lost (the manifest's retry) only when every capability it holds is
	// repeatable; NotRepeatable says why one is not.
	Repeatable    bool
	NotRepeatable string
	// Reaches names the data or endpoints the scope can reach, for
	// mandate check ("https://flights.example/search", "alice/benefits").
	Reaches []string
	// Reach, when set, computes what the scope could bring into a task
	// acting for principal, from the data a manifest seeds (mandate check
	// runs nothing); nil means what the capability returns carries Label.
	Reach func(principal string, seeds []Seed) Reach
}

// Seed is data a manifest imports before a run (a data kind's records),
// as mandate check hands it to Description.Reach.
type Seed struct {
	Collection string
	// Records is the seed file's JSON.
	Records []byte
	// Relations maps a record field to the relation it declares.
	Relations map[string]string
}

// Reach is what a scope could bring into a task: an upper bound of the
// confidentiality tags, by field where the kind knows them.
type Reach struct {
	// Known is false when the kind cannot tell (no seed data): Tags is
	// then empty and the task could hold anything its clearance allows.
	Known   bool
	Tags    []string
	ByField map[string][]string
	// Summary says what the scope reads ("collection benefits, records
	// own, fields plan, passport"); Note how the bound was found.
	Summary, Note string
}

// NotPerformed marks an effect's error as one that happened before
// anything left the kernel (a dial the egress guard refused, a provider
// that refused the charge): uses, budget and rate tokens reserved for the
// call are given back.
func NotPerformed(err error) error {
	if err == nil {
		return nil
	}
	return notPerformed{err}
}

type notPerformed struct{ error }

func (e notPerformed) Unwrap() error { return e.error }

// Performed reports whether err leaves it possible that the effect
// happened: false only for an error marked NotPerformed.
func Performed(err error) bool {
	var np notPerformed
	return !errors.As(err, &np)
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
// It lets a kind write Grant and Narrow as return
// kindapi.AsScope(grant(spec)).
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
	// Seed, when set, is a stable identity of the run that every attempt
	// of it shares (a fleet's submission id), from which a kind derives
	// what must be the same across attempts, such as the pay kind's
	// idempotency keys. Empty: each grant draws its own at random.
	Seed string
	// Name is the grant's name in the manifest (with Seed, it tells two
	// grants of one run apart).
	Name string
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
	label   func() Label
	reveal  func(Label)
	spliced []*Blob
}

// SetReveal sets what the call does with the label of a text a pattern
// part scanned (BlobPartOf): the kernel raises the calling task's label
// by it. Raising is all it can do, so a kind calling it gains nothing.
func (c *Call) SetReveal(f func(Label)) { c.reveal = f }

// Init sets every field of c for a call (the kernel recycles Calls).
func (c *Call) Init(op string, args []byte, scope Scope, task TaskInfo, logger hclog.Logger,
	blob func(abi.Handle) (*Blob, error), label func() Label) {
	*c = Call{Op: op, Args: args, Scope: scope, Task: task, Logger: logger, blob: blob, label: label}
}

// Blob resolves a blob handle named in the call's arguments, in the calling
// task's table only. The kernel records every blob a kind splices into an
// effect: each must flow to the call's sink, and the result carries its
// label.
func (c *Call) Blob(h abi.Handle) (*Blob, error) {
	if c.blob == nil {
		return nil, ErrBadHandle
	}
	b, err := c.blob(h)
	if err != nil {
		return nil, err
	}
	if len(c.spliced) >= MaxSpliced {
		return nil, Errorf(abi.ELIMIT, "a call may splice at most %d blobs", MaxSpliced)
	}
	c.spliced = append(c.spliced, b)
	return b, nil
}

// MaxSpliced bounds the blobs one call may splice.
const MaxSpliced = 64

// TaskLabel is the calling task's label at the call: what everything it
// writes carries. A kind that stores data (a sink with per-item labels)
// checks that it may flow there.
func (c *Call) TaskLabel() Label {
	if c.label == nil {
		return Label{}
	}
	return c.label()
}

// Spliced returns the blobs resolved through Blob so far.
func (c *Call) Spliced() []*Blob { return append([]*Blob(nil), c.spliced...) }

// NumSpliced is how many blobs were resolved through Blob; SplicedAt(i)
// returns the i-th (for the kernel's flow check, without a copy).
func (c *Call) NumSpliced() int { return len(c.spliced) }

// SplicedAt returns the i-th blob resolved through Blob.
func (c *Call) SplicedAt(i int) *Blob { return c.spliced[i] }

// Result is what an operation produced. The kernel turns Data into a blob
// labelled Label joined with the calling task's label and the labels of
// every blob the kind read through Call.Blob; only a kind registered with
// the privilege to lower labels (Config.Declassifiers) has its Label kept
// exactly.
type Result struct {
	Data  []byte
	Label Label
	// Free reports that the effect spent nothing after all (it replayed
	// an idempotent charge another call made meanwhile): the uses and
	// budget reserved for it are given back.
	Free bool
	// Spent, when not nil, settles a reservation: Op.Amount was the most
	// the call could spend (llm: max_tokens and the prompt's bound), and
	// the effect spent *Spent. The difference is given back to every
	// budget on the capability's chain. A Spent above Op.Amount (a server
	// reporting more than it could have used) counts as Op.Amount: the
	// reservation is the most a call can ever take.
	Spent *int64
	// Parts label parts of Data's JSON document differently from Label,
	// which then labels the rest (see NewBlobParts): a task reading the
	// blob carries them all, one splicing a part carries that part's.
	Parts []PartLabel
	// Outcome, for an effect with an Account (Op.Account), is a short
	// account of how it came out, for a person: a response's status
	// ("200"), "charged 390.00 EUR to airline.example (id ch_1)". It must
	// hold nothing the effect returned that the task has not read (the
	// audit log is not labelled): a status, an id, never a body. ""
	// reads as "done".
	Outcome string
}

// FormatBytes shows a size for a person: "64 MiB", "1.5 KiB", "300 B".
func FormatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
