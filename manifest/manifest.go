// Package manifest reads Mandate run manifests: HCL files that name the
// module a root task runs, the principal it acts for, its limits, and the
// capabilities it is granted. It also reads policies, the files an MCP
// server serves (see Policies).
//
//	m, err := manifest.Load("quickstart.hcl", map[string]string{"origin": "http://127.0.0.1:8080"})
//	if err != nil {
//		log.Fatal(err) // quickstart.hcl:12,21: ... (one line per problem)
//	}
//	grants, err := m.Grants(k) // k is a *kernel.Kernel with its kinds registered
//	if err != nil {
//		log.Fatal(err) // a kind's refusal, at the line of the offending attribute
//	}
//	t, err := k.Start(ctx, kernel.TaskSpec{Module: mod, Principal: m.Principal, Limits: m.Limits(), Grants: grants})
//
// # Grammar
//
// A manifest holds exactly one task block, the root task (this text is
// also Grammar, which "mandate run --help" prints):
//
//	task "NAME" {
//	  module    = "guest"         # required: a .wasm file, or a Go guest directory (relative to the manifest)
//	  digest    = "sha256:<hex>"  # optional pin: the module must have this digest
//	  principal = "alice"         # required: on whose behalf the task runs
//	  entry     = "run"           # optional: the function a reactor module runs
//	  clearance = ["pii:alice"]   # optional: the most the task may ever hold (confidentiality tags)
//	  retry     = 1               # optional, 1..5: on a fleet, run again when its node is lost (every
//	                              # capability must be repeatable: GET/HEAD, reads, charges keyed by the run)
//
//	  limits {                    # optional, at most one
//	    memory  = "64MiB"         # size: B, KiB, MiB, GiB, KB, MB, GB; a plain integer is bytes
//	    timeout = "30s"           # Go duration
//	    handles = 256             # capability table size
//	    output  = "1MiB"          # bytes kept of each of stdout and stderr
//	    blobs   = "64MiB"         # bytes of blobs the task holds at once
//	  }
//
//	  result {                    # optional, at most one: what the task's answer may carry
//	    accepts_untrusted = false # refuse a result tainted by any source (EFLOW when the task sets it)
//	  }
//
//	  seed "COLLECTION" {         # any number: records imported into the data store before the run
//	    file      = "data/benefits.json"        # .json or .csv, relative to the manifest
//	    relations = { manager = "manager_of" }  # optional: FIELD = RELATION edges to derive
//	  }
//
//	  cap "KIND" "NAME" {         # any number; NAME is what the guest passes to cap_lookup
//	    audit    = true           # kernel-level: write every decision to the audit log first
//	    rate     = "10/s"         # kernel-level: at most 10 calls a second, for this
//	                              # capability and everything derived from it (s, m, h, or a duration)
//	    max_uses = 1              # kernel-level: at most 1 effect, for the whole derivation subtree
//	    budget   = "100.00"       # kernel-level, kinds with amounts (pay): most spent by the subtree
//	    when         = "request.method == 'GET'"   # kernel-level: CEL (or a list), every use must satisfy it
//	    approve_when = "request.method == 'POST'"  # kernel-level: CEL (or a list), a match needs a person's yes
//	    approve_mints = true      # kernel-level: a call a person approved needs no second yes in this task
//	    ...                       # every other attribute is the kind's grant spec
//	  }
//	}
//
// Values are HCL expressions. The only variables are var.NAME, set by the
// caller (mandate run --var NAME=VALUE); there are no functions. A cap block
// holds attributes only; they are evaluated and handed to the kind as one
// JSON object (HCL strings, numbers, bools, lists and objects map to their
// JSON counterparts; null attributes are left out). The attributes when
// and approve_when (a CEL expression, or a list of them, over the kind's
// variables: kernel.Info.Vars), audit, rate, max_uses and budget are the
// kernel's; label is reserved for the kernel and not supported yet. Uses
// and budget count effects that happened, never refused calls.
//
// # Constraints
//
// Besides its kind's variables (net: request; pay: charge and offer;
// kernel.Info.Vars), every when and approve_when may read
//
//	uses   the earlier uses of this capability and of every capability derived
//	       from it, newest first: each the variables its call was checked with,
//	       plus u.time (a timestamp) and u.pending (its effect has not ended)
//	now    the time the call is decided (a timestamp)
//	sum    sum(list) or list.sum(): the total of a list of ints or of doubles
//
// so that each of these is one line (on a net capability):
//
//	when = "size(uses) == 0 || request.body.recipient == uses[0].request.body.recipient"  # bind on first use
//	when = "!uses.exists(u, u.request.body.recipient == request.body.recipient)"          # one per recipient
//	when = "uses.all(u, u.request.body.order_id == request.body.order_id)"                # the same id as before
//	when = "sum(uses.map(u, double(u.request.body.amount))) + double(request.body.amount) <= 100.0"
//	when = "uses.filter(u, u.time > now - duration('1h')).size() < 3"                      # three an hour
//
// A use is a call whose effect ran (or failed after it may have left);
// refused calls are not uses. The kernel keeps the last kernel.MaxHistory
// (64) uses of a capability whose constraints read uses, each at most
// kernel.MaxUseBytes (16 KiB) of variables (a larger call is refused with
// ELIMIT); older uses are forgotten, so a rule that must hold over the
// capability's whole life also sets max_uses. JSON numbers are ints or
// doubles as written (40, 40.5): convert them before sum, as above; a sum
// whose elements' type is unknown does not compile. See kernel/history.go.
//
// # Policies
//
// A policy is what "mandate mcp serve POLICY.hcl" offers an MCP client:
// tools, each call of which runs as a fresh task. It is written in the
// same language as a manifest, with the same variables, values and cap
// blocks, but holds exactly one session block and one or more tool blocks
// instead of a task block (this text is also PolicyGrammar, which
// "mandate mcp serve --help" prints):
//
//	session {                     # exactly one
//	  principal = "alice"         # required: on whose behalf every tool acts
//	  clearance = ["pii:alice"]   # optional: the most the session (the client's model) may ever be shown
//
//	  limits {                    # optional, at most one: the whole session's
//	    memory  = "64MiB"         # size: B, KiB, MiB, GiB, KB, MB, GB; a plain integer is bytes
//	    timeout = "8h"            # Go duration: the session's lifetime
//	    handles = 256             # capability table size
//	    output  = "1MiB"          # bytes kept of each of stdout and stderr
//	    blobs   = "64MiB"         # bytes of blobs held at once
//	  }
//
//	  seed "COLLECTION" {         # any number: records imported into the data store before the session
//	    file      = "data/benefits.json"        # .json or .csv, relative to the policy
//	    relations = { manager = "manager_of" }  # optional: FIELD = RELATION edges to derive
//	  }
//	}
//
//	tool "NAME" {                 # one or more; NAME is the MCP tool name: 1 to 64 of A-Z a-z 0-9 _ . -
//	  module       = "tools/benefits"  # required: a .wasm file, or a Go guest directory (relative to the policy)
//	  digest       = "sha256:<hex>"    # optional pin: the module must have this digest
//	  entry        = "run"             # optional: the function a reactor module runs
//	  description  = "Your own benefits record"  # required: what the client is shown (never taken from a guest)
//	  input_schema = {                 # optional JSON Schema of the arguments, as an object or a string
//	    type       = "object"          # holding JSON; its type must be "object"; default { type = "object" }
//	    properties = { year = { type = "integer" } }
//	    required   = ["year"]
//	  }
//	  result       = "value"           # optional: "value" (default), or "reference": a mandate://blob reference
//
//	  limits {                    # optional, at most one: each call's, as in the session's limits
//	    memory  = "64MiB"
//	    timeout = "30s"
//	  }
//
//	  cap "KIND" "NAME" {         # any number, as in a task manifest; NAME is what the guest passes to cap_lookup
//	    audit    = true           # kernel-level: write every decision to the audit log first
//	    rate     = "10/s"         # kernel-level: at most 10 calls a second, for this
//	                              # capability and everything derived from it (s, m, h, or a duration)
//	    max_uses = 1              # kernel-level: at most 1 effect, for the whole derivation subtree
//	    budget   = "100.00"       # kernel-level, kinds with amounts (pay): most spent by the subtree
//	    when         = "request.method == 'GET'"   # kernel-level: CEL (or a list), every use must satisfy it
//	    approve_when = "request.method == 'POST'"  # kernel-level: CEL (or a list), a match needs a person's yes
//	    approve_mints = true      # kernel-level: a call a person approved needs no second yes in this task
//	    ...                       # every other attribute is the kind's grant spec
//	  }
//	}
//
// LoadPolicy reads a policy into a *Policy. A tool's name is what the
// client calls; its description and input schema are what the client is
// shown, and come only from the policy, never from a guest. Every call
// acts for the session's principal, and a tool's cap blocks are checked
// exactly as a task's: kernel attributes, reserved attributes, distinct
// names within the tool. Tool.Grants mints a call's capabilities. Load
// refuses a policy, and LoadPolicy a task manifest, saying which command
// takes it.
//
// # Errors
//
// Every problem is reported with its position, one per line, as
// FILE:LINE,COL: message. Load and LoadPolicy report everything they can
// find at once.
package manifest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/sandbox"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/gocty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// MaxSize bounds a manifest file.
const MaxSize = 1 << 20

// Bounds on limits. Memory is bounded by 32-bit linear memory; output by
// what is sensible to keep in the host.
const (
	MaxMemory    = 4 << 30
	MaxOutput    = 1 << 30
	MaxBlobBytes = 16 << 30
)

// Manifest is a loaded, validated manifest. Its fields are set by Load and
// must not be modified.
type Manifest struct {
	// Path is the manifest's file name as given to Load; Dir is its
	// directory, absolute.
	Path string
	Dir  string
	// Name is the task block's label.
	Name string
	// ModulePath is the module attribute resolved against Dir, with
	// symbolic links resolved: a .wasm file or a guest directory
	// (ModuleIsDir).
	ModulePath  string
	ModuleIsDir bool
	// Digest is the pinned "sha256:<hex>" digest, "" when not pinned.
	Digest    string
	Principal string
	// Entry is the reactor entry, "" for the default.
	Entry string
	// Caps are the cap blocks, in file order.
	Caps []Cap
	// Seeds are the records the run imports into the data store first.
	Seeds []Seed
	// Clearance bounds what the task may ever hold; nil: unbounded.
	Clearance *kernel.Label
	// RefuseTaintedResult is result { accepts_untrusted = false }: the
	// task may not set a result carrying any integrity taint.
	RefuseTaintedResult bool
	// Retry is how many times a fleet may run the task again when the
	// node running it is lost (retry = N, 1..MaxRetry); 0: never, the run
	// is marked lost. Only a task whose every capability is repeatable
	// (kernel.Description.Repeatable: safe methods, reads, charges with
	// keys derived from the run) may set it; the host checks that when the
	// run starts.
	Retry int

	limits      kernel.Limits
	moduleRange hcl.Range
	digestRange hcl.Range
}

// Cap is one cap block, evaluated.
type Cap struct {
	Kind string
	Name string
	// Audit is the kernel-level audit attribute.
	Audit bool
	// Rate is the kernel-level rate attribute; zero when unset.
	Rate kernel.Rate
	// MaxUses is the kernel-level max_uses attribute; 0 when unset.
	MaxUses int64
	// ApproveMints is the kernel-level approve_mints attribute: a call a
	// person approved is approved for the rest of the task.
	ApproveMints bool
	// Budget is the kernel-level budget attribute as written, read in the
	// kind's unit by Grants; "" when unset.
	Budget string
	// When and ApproveWhen are the kernel-level constraint expressions.
	When, ApproveWhen []string
	// Spec is the block's other attributes as a JSON object: the kind's
	// grant spec.
	Spec []byte

	rng       hcl.Range            // the block's header
	kindRange hcl.Range            // the kind label
	attrs     map[string]hcl.Range // attribute name -> its value's range
}

// Limits returns the task's limits; zero fields take the kernel's defaults.
func (m *Manifest) Limits() kernel.Limits { return m.limits }

// Error is a list of positioned problems in a manifest. Its message has one
// line per problem: FILE:LINE,COL: message.
type Error struct {
	Diags hcl.Diagnostics
}

func (e *Error) Error() string {
	var lines []string
	for _, d := range e.Diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		lines = append(lines, formatDiag(d))
	}
	if len(lines) == 0 {
		return "manifest: unknown error"
	}
	return strings.Join(lines, "\n")
}

func formatDiag(d *hcl.Diagnostic) string {
	msg := d.Summary
	if d.Detail != "" {
		msg += ": " + d.Detail
	}
	if d.Subject == nil {
		return msg
	}
	return fmt.Sprintf("%s:%d,%d: %s", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column, msg)
}

func diagErr(rng hcl.Range, format string, args ...any) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: fmt.Sprintf(format, args...), Subject: rng.Ptr()}
}

// Reserved cap attributes. audit is handled by the kernel; the others are
// kept for labels, clearances and constraints and refused until they are
// implemented, so a manifest that relies on them never runs without them.
var (
	kernelAttrs   = map[string]bool{"audit": true, "rate": true, "when": true, "approve_when": true, "max_uses": true, "budget": true, "approve_mints": true}
	reservedAttrs = map[string]bool{"label": true}
)

var rootSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: "task", LabelNames: []string{"name"}}},
}

var taskSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "module", Required: true},
		{Name: "digest"},
		{Name: "principal", Required: true},
		{Name: "entry"},
		{Name: "clearance"},
		{Name: "retry"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "limits"},
		{Type: "result"},
		{Type: "cap", LabelNames: []string{"kind", "name"}},
		{Type: "seed", LabelNames: []string{"collection"}},
	},
}

var resultSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "accepts_untrusted"}},
}

var seedSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "file", Required: true}, {Name: "relations"}},
}

// Seed is a seed block: records the run imports into the data store
// before it starts (replacing records with the same ids), so an example
// carries its data with it:
//
//	seed "benefits" {
//	  file      = "data/benefits.json"          # .json or .csv, relative to the manifest
//	  relations = { manager = "manager_of" }    # optional: FIELD = RELATION edges to derive
//	}
type Seed struct {
	Collection string
	File       string // absolute
	Relations  map[string]string

	rng hcl.Range
}

// Error positions an error about this seed block.
func (s *Seed) Error(err error) error {
	return &Error{hcl.Diagnostics{diagErr(s.rng, "seed %q: %v", s.Collection, err)}}
}

var limitsSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "memory"}, {Name: "timeout"}, {Name: "handles"}, {Name: "output"}, {Name: "blobs"},
	},
}

// Load reads, parses and validates the manifest at path. vars are the
// values of var.NAME. It needs no kernel: the cap blocks' specs are checked
// by their kinds in Grants. A failure is an *Error (or an I/O error).
func Load(path string, vars map[string]string) (*Manifest, error) {
	src, dir, err := readFile(path, "manifest")
	if err != nil {
		return nil, err
	}
	return Parse(src, path, dir, vars)
}

// readFile reads a manifest or policy (what) of at most MaxSize bytes and
// returns it with its directory, absolute.
func readFile(path, what string) ([]byte, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, "", err
	}
	if len(src) > MaxSize {
		return nil, "", fmt.Errorf("%s: %s larger than %d bytes", path, what, MaxSize)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, "", err
	}
	return src, dir, nil
}

// Parse is Load on a manifest already in memory: filename is used in
// positions, dir is where relative module paths resolve.
func Parse(src []byte, filename, dir string, vars map[string]string) (*Manifest, error) {
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, &Error{diags}
	}
	p := newParser(dir, vars)
	m := &Manifest{Path: filename, Dir: dir}
	p.root(file, m)
	if p.diags.HasErrors() {
		return nil, &Error{p.diags}
	}
	return m, nil
}

// parser evaluates the blocks of one file, collecting every problem.
type parser struct {
	dir   string // where relative paths resolve
	vars  map[string]string
	ctx   *hcl.EvalContext
	diags hcl.Diagnostics
}

func newParser(dir string, vars map[string]string) *parser {
	p := &parser{dir: dir, vars: vars}
	p.ctx = &hcl.EvalContext{Variables: map[string]cty.Value{"var": p.varsObject()}}
	return p
}

func (p *parser) add(d ...*hcl.Diagnostic) { p.diags = append(p.diags, d...) }

func (p *parser) varsObject() cty.Value {
	if len(p.vars) == 0 {
		return cty.EmptyObjectVal
	}
	m := make(map[string]cty.Value, len(p.vars))
	for k, v := range p.vars {
		m[k] = cty.StringVal(v)
	}
	return cty.ObjectVal(m)
}

func (p *parser) root(file *hcl.File, m *Manifest) {
	if rng, ok := policyBlock(file); ok {
		p.add(diagErr(rng, "this is a policy (session and tool blocks), not a task manifest: use mandate mcp serve"))
		return
	}
	content, diags := file.Body.Content(rootSchema)
	p.add(diags...)
	var tasks []*hcl.Block
	for _, b := range content.Blocks {
		if b.Type == "task" {
			tasks = append(tasks, b)
		}
	}
	switch {
	case len(tasks) == 0:
		if !diags.HasErrors() {
			rng := file.Body.MissingItemRange()
			p.add(diagErr(rng, `no task block: a manifest describes one root task, task "NAME" { ... }`))
		}
		return
	case len(tasks) > 1:
		p.add(diagErr(tasks[1].DefRange, "only one task block is allowed; the first is at %s", posString(tasks[0].DefRange)))
		return
	}
	p.task(tasks[0], m)
}

// policyBlock returns the first session or tool block of a file that has
// no task block: a policy given where a task manifest belongs.
func policyBlock(file *hcl.File) (hcl.Range, bool) {
	body, ok := file.Body.(*hclsyntax.Body)
	if !ok {
		return hcl.Range{}, false
	}
	var first *hclsyntax.Block
	for _, b := range body.Blocks {
		switch b.Type {
		case "task":
			return hcl.Range{}, false
		case "session", "tool":
			if first == nil {
				first = b
			}
		}
	}
	if first == nil {
		return hcl.Range{}, false
	}
	return first.DefRange(), true
}

func posString(r hcl.Range) string {
	return fmt.Sprintf("%s:%d,%d", r.Filename, r.Start.Line, r.Start.Column)
}

func (p *parser) task(b *hcl.Block, m *Manifest) {
	m.Name = b.Labels[0]
	if m.Name == "" {
		p.add(diagErr(b.LabelRanges[0], "task name must not be empty"))
	}
	content, diags := b.Body.Content(taskSchema)
	p.add(diags...)

	u := p.unit(content)
	m.Principal = u.principal
	m.ModulePath, m.ModuleIsDir, m.moduleRange = u.modulePath, u.moduleIsDir, u.moduleRange
	m.Digest, m.digestRange = u.digest, u.digestRange
	m.Entry = u.entry
	m.Clearance = u.clearance
	m.Caps = u.caps
	m.Seeds = u.seeds
	m.limits = u.limits
	var result *hcl.Block
	for _, blk := range content.Blocks {
		if blk.Type != "result" {
			continue
		}
		if result != nil {
			p.add(diagErr(blk.DefRange, "only one result block is allowed; the first is at %s", posString(result.DefRange)))
			continue
		}
		result = blk
		m.RefuseTaintedResult = p.result(blk)
	}
	if a, ok := content.Attributes["retry"]; ok {
		if v, vok := p.eval(a.Expr); vok {
			var n64 int64
			if v.IsNull() || v.Type() != cty.Number || gocty.FromCtyValue(v, &n64) != nil || n64 < 1 || n64 > MaxRetry {
				p.add(diagErr(a.Expr.Range(), "retry must be a whole number from 1 to %d, not %s", MaxRetry, describe(v)))
			} else {
				m.Retry = int(n64)
			}
		}
	}
}

// MaxRetry bounds a task's retry attribute.
const MaxRetry = 5

// result parses a result block: whether the task's result must carry no
// integrity taint.
func (p *parser) result(b *hcl.Block) (refuseTainted bool) {
	if len(b.Labels) != 0 {
		p.add(diagErr(b.DefRange, "result takes no labels"))
	}
	content, diags := b.Body.Content(resultSchema)
	p.add(diags...)
	if a, ok := content.Attributes["accepts_untrusted"]; ok {
		if v, ok := p.eval(a.Expr); ok {
			if v.IsNull() || v.Type() != cty.Bool {
				p.add(diagErr(a.Expr.Range(), "accepts_untrusted must be true or false"))
				return false
			}
			return v.False()
		}
	}
	return false
}

// unit is what task, session and tool blocks share: the module a task
// runs, on whose behalf, its limits, its capabilities and the data it is
// seeded with. Each block's schema says which of these it may hold.
type unit struct {
	modulePath  string
	moduleIsDir bool
	moduleRange hcl.Range
	digest      string
	digestRange hcl.Range
	principal   string
	entry       string
	clearance   *kernel.Label
	caps        []Cap
	seeds       []Seed
	limits      kernel.Limits
}

// unit parses the attributes module, digest, principal, entry and
// clearance and the blocks limits, cap and seed of a block's content
// (those its schema allows): a cap block is validated the same wherever
// it appears.
func (p *parser) unit(content *hcl.BodyContent) unit {
	var u unit
	if a, ok := content.Attributes["module"]; ok {
		if s, ok := p.str(a, true); ok {
			p.module(a, s, &u)
		}
	}
	if a, ok := content.Attributes["digest"]; ok {
		if s, ok := p.str(a, false); ok {
			if !sandbox.IsDigest(s) {
				p.add(diagErr(a.Expr.Range(), `digest %q is not of the form "sha256:" followed by 64 lower-case hex digits`, s))
			} else {
				u.digest = s
				u.digestRange = a.Expr.Range()
			}
		}
	}
	if a, ok := content.Attributes["principal"]; ok {
		if s, ok := p.str(a, true); ok {
			u.principal = s
		}
	}
	if a, ok := content.Attributes["entry"]; ok {
		if s, ok := p.str(a, true); ok {
			u.entry = s
		}
	}
	if a, ok := content.Attributes["clearance"]; ok {
		if v, ok := p.eval(a.Expr); ok {
			tags, err := stringOrList(v)
			if err != nil && !(v.Type().IsTupleType() && v.LengthInt() == 0) {
				p.add(diagErr(a.Expr.Range(), "clearance must be a list of confidentiality tags, e.g. [\"pii:alice\"]"))
			} else {
				l := kernel.NewLabel(tags, nil)
				u.clearance = &l
			}
		}
	}

	seen := make(map[string]hcl.Range)
	var limits *hcl.Block
	for _, blk := range content.Blocks {
		switch blk.Type {
		case "limits":
			if limits != nil {
				p.add(diagErr(blk.DefRange, "only one limits block is allowed; the first is at %s", posString(limits.DefRange)))
				continue
			}
			limits = blk
			p.limits(blk, &u.limits)
		case "cap":
			name := blk.Labels[1]
			if first, dup := seen[name]; dup {
				p.add(diagErr(blk.LabelRanges[1], "duplicate capability name %q; the first is at %s", name, posString(first)))
				continue
			}
			seen[name] = blk.LabelRanges[1]
			if c, ok := p.cap(blk); ok {
				u.caps = append(u.caps, c)
			}
		case "seed":
			if s, ok := p.seed(blk); ok {
				u.seeds = append(u.seeds, s)
			}
		}
	}
	return u
}

func (p *parser) seed(b *hcl.Block) (Seed, bool) {
	s := Seed{Collection: b.Labels[0], rng: b.DefRange}
	if s.Collection == "" {
		p.add(diagErr(b.LabelRanges[0], "seed collection must not be empty"))
		return Seed{}, false
	}
	content, diags := b.Body.Content(seedSchema)
	p.add(diags...)
	if diags.HasErrors() {
		return Seed{}, false
	}
	a := content.Attributes["file"]
	f, ok := p.str(a, true)
	if !ok {
		return Seed{}, false
	}
	if !filepath.IsAbs(f) {
		f = filepath.Join(p.dir, f)
	}
	if _, err := os.Stat(f); err != nil {
		p.add(diagErr(a.Expr.Range(), "seed file: %v", err))
		return Seed{}, false
	}
	s.File = f
	if a, ok := content.Attributes["relations"]; ok {
		v, vok := p.eval(a.Expr)
		if !vok {
			return Seed{}, false
		}
		if v.IsNull() || !(v.Type().IsObjectType() || v.Type().IsMapType()) {
			p.add(diagErr(a.Expr.Range(), "relations must be an object of FIELD = \"relation\""))
			return Seed{}, false
		}
		s.Relations = map[string]string{}
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			if e.IsNull() || e.Type() != cty.String || e.AsString() == "" {
				p.add(diagErr(a.Expr.Range(), "relation for field %s must be a non-empty string", k.AsString()))
				return Seed{}, false
			}
			s.Relations[k.AsString()] = e.AsString()
		}
	}
	return s, true
}

func (p *parser) module(a *hcl.Attribute, s string, u *unit) {
	path := s
	if !filepath.IsAbs(path) {
		path = filepath.Join(p.dir, path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		msg := err.Error()
		if errors.Is(err, os.ErrNotExist) {
			msg = "no such file or directory"
		}
		p.add(diagErr(a.Expr.Range(), "module %q: %s", s, msg))
		return
	}
	switch {
	case fi.IsDir():
		u.moduleIsDir = true
	case !fi.Mode().IsRegular():
		p.add(diagErr(a.Expr.Range(), "module %q is neither a .wasm file nor a guest directory", s))
		return
	}
	// A guest directory is built where it really is, inside its module.
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	u.modulePath = path
	u.moduleRange = a.Expr.Range()
}

// eval evaluates an expression, first checking that every variable it
// references is set, so the message names the missing variable.
func (p *parser) eval(expr hcl.Expression) (cty.Value, bool) {
	ok := true
	for _, tr := range expr.Variables() {
		root := tr.RootName()
		if root != "var" {
			p.add(diagErr(tr.SourceRange(), "unknown variable %q: the only variables are var.NAME", root))
			ok = false
			continue
		}
		if len(tr) < 2 {
			p.add(diagErr(tr.SourceRange(), "var must be followed by a variable name, as in var.origin"))
			ok = false
			continue
		}
		var name string
		switch s := tr[1].(type) {
		case hcl.TraverseAttr:
			name = s.Name
		case hcl.TraverseIndex:
			if s.Key.Type() == cty.String {
				name = s.Key.AsString()
			}
		}
		if name == "" {
			continue // let evaluation report it
		}
		if _, set := p.vars[name]; !set {
			p.add(diagErr(tr.SourceRange(), "variable %q is not set: pass --var %s=VALUE", name, name))
			ok = false
		}
	}
	if !ok {
		return cty.NilVal, false
	}
	v, diags := expr.Value(p.ctx)
	p.add(diags...)
	if diags.HasErrors() {
		return cty.NilVal, false
	}
	if !v.IsWhollyKnown() {
		p.add(diagErr(expr.Range(), "value is not known"))
		return cty.NilVal, false
	}
	return v, true
}

// str evaluates a string attribute.
func (p *parser) str(a *hcl.Attribute, nonEmpty bool) (string, bool) {
	v, ok := p.eval(a.Expr)
	if !ok {
		return "", false
	}
	if v.IsNull() || v.Type() != cty.String {
		p.add(diagErr(a.Expr.Range(), "%s must be a string, not %s", a.Name, typeName(v)))
		return "", false
	}
	s := v.AsString()
	if nonEmpty && strings.TrimSpace(s) == "" {
		p.add(diagErr(a.Expr.Range(), "%s must not be empty", a.Name))
		return "", false
	}
	return s, true
}

func typeName(v cty.Value) string {
	if v.IsNull() {
		return "null"
	}
	return v.Type().FriendlyName()
}

func (p *parser) limits(b *hcl.Block, l *kernel.Limits) {
	if len(b.Labels) != 0 {
		p.add(diagErr(b.DefRange, "limits takes no labels"))
	}
	content, diags := b.Body.Content(limitsSchema)
	p.add(diags...)
	if a, ok := content.Attributes["memory"]; ok {
		if n, ok := p.size(a, MaxMemory); ok {
			l.Memory = n
		}
	}
	if a, ok := content.Attributes["output"]; ok {
		if n, ok := p.size(a, MaxOutput); ok {
			l.MaxOutput = int(n)
		}
	}
	if a, ok := content.Attributes["blobs"]; ok {
		if n, ok := p.size(a, MaxBlobBytes); ok {
			l.MaxBlobBytes = int64(n)
		}
	}
	if a, ok := content.Attributes["timeout"]; ok {
		if s, ok := p.str(a, true); ok {
			d, err := time.ParseDuration(strings.TrimSpace(s))
			switch {
			case err != nil:
				p.add(diagErr(a.Expr.Range(), `timeout %q is not a duration (examples: "30s", "2m", "1h30m")`, s))
			case d <= 0:
				p.add(diagErr(a.Expr.Range(), "timeout %q must be positive", s))
			default:
				l.Timeout = d
			}
		}
	}
	if a, ok := content.Attributes["handles"]; ok {
		if v, ok := p.eval(a.Expr); ok {
			n, ok := wholeNumber(v)
			switch {
			case !ok:
				p.add(diagErr(a.Expr.Range(), "handles must be a whole number, not %s", describe(v)))
			case n < 1 || n > kernel.MaxHandles:
				p.add(diagErr(a.Expr.Range(), "handles = %d is out of range: 1 to %d", n, kernel.MaxHandles))
			default:
				l.MaxHandles = int(n)
			}
		}
	}
}

func describe(v cty.Value) string {
	if !v.IsNull() && v.Type() == cty.Number {
		return v.AsBigFloat().String()
	}
	if !v.IsNull() && v.Type() == cty.String {
		return fmt.Sprintf("%q", v.AsString())
	}
	return typeName(v)
}

func wholeNumber(v cty.Value) (int64, bool) {
	if v.IsNull() || v.Type() != cty.Number {
		return 0, false
	}
	bf := v.AsBigFloat()
	if !bf.IsInt() {
		return 0, false
	}
	n, acc := bf.Int64()
	if acc != 0 {
		return 0, false
	}
	return n, true
}

// size evaluates a size attribute: a whole number of bytes, or a string
// such as "64MiB".
func (p *parser) size(a *hcl.Attribute, max uint64) (uint64, bool) {
	v, ok := p.eval(a.Expr)
	if !ok {
		return 0, false
	}
	var n uint64
	switch {
	case !v.IsNull() && v.Type() == cty.String:
		var err error
		n, err = ParseSize(v.AsString())
		if err != nil {
			p.add(diagErr(a.Expr.Range(), "%s: %v", a.Name, err))
			return 0, false
		}
	default:
		i, ok := wholeNumber(v)
		if !ok || i < 0 {
			p.add(diagErr(a.Expr.Range(), `%s must be a size such as "64MiB" or a whole number of bytes, not %s`, a.Name, describe(v)))
			return 0, false
		}
		n = uint64(i)
	}
	if n == 0 || n > max {
		p.add(diagErr(a.Expr.Range(), "%s = %d bytes is out of range: 1 to %d", a.Name, n, max))
		return 0, false
	}
	return n, true
}

// ParseSize parses a size such as "64MiB"; see abi.ParseSize.
func ParseSize(s string) (uint64, error) { return abi.ParseSize(s) }

func (p *parser) cap(b *hcl.Block) (Cap, bool) {
	c := Cap{
		Kind:      b.Labels[0],
		Name:      b.Labels[1],
		rng:       b.DefRange,
		kindRange: b.LabelRanges[0],
		attrs:     make(map[string]hcl.Range),
	}
	ok := true
	if c.Kind == "" {
		p.add(diagErr(b.LabelRanges[0], "capability kind must not be empty"))
		ok = false
	}
	if c.Name == "" || len(c.Name) > abi.MaxNameLen {
		p.add(diagErr(b.LabelRanges[1], "capability name must be 1 to %d bytes", abi.MaxNameLen))
		ok = false
	}
	attrs, diags := b.Body.JustAttributes()
	p.add(diags...)
	if diags.HasErrors() {
		ok = false
	}
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { // file order
		return attrs[names[i]].Range.Start.Byte < attrs[names[j]].Range.Start.Byte
	})
	spec := make(map[string]cty.Value)
	for _, n := range names {
		a := attrs[n]
		c.attrs[n] = a.Expr.Range()
		switch {
		case reservedAttrs[n]:
			p.add(diagErr(a.NameRange, "%s is reserved for the kernel and not supported yet", n))
			ok = false
			continue
		case n == "audit":
			v, vok := p.eval(a.Expr)
			if !vok {
				ok = false
				continue
			}
			if v.IsNull() || v.Type() != cty.Bool {
				p.add(diagErr(a.Expr.Range(), "audit must be true or false, not %s", describe(v)))
				ok = false
				continue
			}
			c.Audit = v.True()
			continue
		case n == "approve_mints":
			v, vok := p.eval(a.Expr)
			if !vok {
				ok = false
				continue
			}
			if v.IsNull() || v.Type() != cty.Bool {
				p.add(diagErr(a.Expr.Range(), "approve_mints must be true or false, not %s", describe(v)))
				ok = false
				continue
			}
			c.ApproveMints = v.True()
			continue
		case n == "rate":
			s, sok := p.str(a, true)
			if !sok {
				ok = false
				continue
			}
			r, err := kernel.ParseRate(s)
			if err != nil {
				p.add(diagErr(a.Expr.Range(), "%v", err))
				ok = false
				continue
			}
			c.Rate = r
			continue
		case n == "max_uses":
			v, vok := p.eval(a.Expr)
			if !vok {
				ok = false
				continue
			}
			var n64 int64
			if v.IsNull() || v.Type() != cty.Number || gocty.FromCtyValue(v, &n64) != nil || n64 < 1 {
				p.add(diagErr(a.Expr.Range(), "max_uses must be a whole number of at least 1, not %s", describe(v)))
				ok = false
				continue
			}
			c.MaxUses = n64
			continue
		case n == "budget":
			v, vok := p.eval(a.Expr)
			if !vok {
				ok = false
				continue
			}
			switch {
			case !v.IsNull() && v.Type() == cty.String && strings.TrimSpace(v.AsString()) != "":
				c.Budget = v.AsString()
			case !v.IsNull() && v.Type() == cty.Number:
				c.Budget = v.AsBigFloat().Text('f', -1)
			default:
				p.add(diagErr(a.Expr.Range(), "budget must be an amount such as \"1000.00\", not %s", describe(v)))
				ok = false
				continue
			}
			continue
		case n == "when" || n == "approve_when":
			v, vok := p.eval(a.Expr)
			if !vok {
				ok = false
				continue
			}
			exprs, err := stringOrList(v)
			if err != nil {
				p.add(diagErr(a.Expr.Range(), "%s must be a CEL expression or a list of them, not %s", n, describe(v)))
				ok = false
				continue
			}
			if n == "when" {
				c.When = exprs
			} else {
				c.ApproveWhen = exprs
			}
			continue
		}
		v, vok := p.eval(a.Expr)
		if !vok {
			ok = false
			continue
		}
		if v.IsNull() {
			continue
		}
		spec[n] = v
	}
	if !ok {
		return Cap{}, false
	}
	js, err := ctyjson.SimpleJSONValue{Value: cty.ObjectVal(spec)}.MarshalJSON()
	if len(spec) == 0 {
		js, err = []byte("{}"), nil
	}
	if err != nil {
		p.add(diagErr(b.DefRange, "cap %q %q: cannot encode as JSON: %v", c.Kind, c.Name, err))
		return Cap{}, false
	}
	c.Spec = js
	return c, true
}

// CheckDigest reports whether digest (as sandbox.Digest computes it)
// matches the manifest's pin, if any. The error points at the pin.
func (m *Manifest) CheckDigest(digest string) error {
	return checkDigest(m.Digest, digest, m.digestRange, moduleName(m.Dir, m.ModulePath), "manifest")
}

// checkDigest compares a module's digest with the pin at rng in a
// manifest or policy (what).
func checkDigest(pin, digest string, rng hcl.Range, module, what string) error {
	if pin == "" || pin == digest {
		return nil
	}
	return &Error{hcl.Diagnostics{diagErr(rng,
		"module %s has digest %s, but the %s pins %s", module, digest, what, pin)}}
}

// moduleName is a module's path as errors show it: relative to the
// manifest's directory when it is inside it.
func moduleName(dir, path string) string {
	if rel, err := filepath.Rel(dir, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

// ModuleError returns an error about the module (a failed build, an
// invalid .wasm file) positioned at the module attribute.
func (m *Manifest) ModuleError(err error) error {
	return moduleError(m.moduleRange, moduleName(m.Dir, m.ModulePath), err)
}

func moduleError(rng hcl.Range, module string, err error) error {
	return &Error{hcl.Diagnostics{diagErr(rng, "module %s: %v", module, err)}}
}

// Granter mints root scopes. *kernel.Kernel implements it.
type Granter interface {
	Kind(name string) (kernel.Kind, bool)
	Kinds() []string
	Grant(kind string, g kernel.GrantContext, spec []byte) (kernel.Scope, error)
	CompileConstraints(kind string, when, approveWhen []string) (kernel.Constraints, error)
	ParseBudget(kind string, s kernel.Scope, text string) (int64, error)
}

// stringOrList reads a string or a list of strings.
func stringOrList(v cty.Value) ([]string, error) {
	if v.IsNull() || !v.IsKnown() {
		return nil, errors.New("null")
	}
	if v.Type() == cty.String {
		return []string{v.AsString()}, nil
	}
	if !v.Type().IsListType() && !v.Type().IsTupleType() {
		return nil, errors.New("not a string or list")
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() || e.Type() != cty.String {
			return nil, errors.New("not a string")
		}
		out = append(out, e.AsString())
	}
	return out, nil
}

var _ Granter = (*kernel.Kernel)(nil)

// Grants mints the root scopes of the manifest's cap blocks with k's
// kinds. Every refusal is reported with its position: an unknown kind at
// the kind label, a kind's *kernel.FieldError at that attribute's value,
// any other error at the cap block. Secrets named by a grant (header env
// variables, files) are read from the host environment and relative to the
// manifest's directory.
func (m *Manifest) Grants(k Granter) ([]kernel.GrantSpec, error) {
	return m.GrantsWith(k, kernel.GrantContext{Dir: m.Dir})
}

// GrantsWith is Grants with a given grant context (tests use it to supply
// the environment).
func (m *Manifest) GrantsWith(k Granter, g kernel.GrantContext) ([]kernel.GrantSpec, error) {
	return grantsWith(m.Caps, m.Dir, k, g)
}

// grantsWith mints the root scopes of caps, cap blocks of a file in dir
// (g.Dir when it is set): the code behind Manifest.GrantsWith and
// Tool.GrantsWith.
func grantsWith(caps []Cap, dir string, k Granter, g kernel.GrantContext) ([]kernel.GrantSpec, error) {
	if g.Dir == "" {
		g.Dir = dir
	}
	var diags hcl.Diagnostics
	grants := make([]kernel.GrantSpec, 0, len(caps))
	for _, c := range caps {
		if _, ok := k.Kind(c.Kind); !ok {
			diags = append(diags, diagErr(c.kindRange, "unknown capability kind %q (known: %s)", c.Kind, strings.Join(k.Kinds(), ", ")))
			continue
		}
		gc := g
		gc.Name = c.Name
		scope, err := k.Grant(c.Kind, gc, c.Spec)
		if err == nil && scope == nil {
			err = errors.New("the kind returned no scope")
		}
		if err != nil {
			diags = append(diags, c.grantDiag(err))
			continue
		}
		var cons kernel.Constraints
		if len(c.When) > 0 || len(c.ApproveWhen) > 0 {
			w, err := k.CompileConstraints(c.Kind, c.When, nil)
			if err != nil {
				diags = append(diags, diagErr(c.attrs["when"], "cap %q %q: %v", c.Kind, c.Name, err))
				continue
			}
			a, err := k.CompileConstraints(c.Kind, nil, c.ApproveWhen)
			if err != nil {
				diags = append(diags, diagErr(c.attrs["approve_when"], "cap %q %q: %v", c.Kind, c.Name, err))
				continue
			}
			cons = kernel.Constraints{When: w.When, ApproveWhen: a.ApproveWhen}
		}
		allow := kernel.Allowance{MaxUses: c.MaxUses}
		if c.Budget != "" {
			b, err := k.ParseBudget(c.Kind, scope, c.Budget)
			if err != nil {
				diags = append(diags, diagErr(c.attrs["budget"], "cap %q %q: budget: %v", c.Kind, c.Name, err))
				continue
			}
			allow.Budget = b
		}
		grants = append(grants, kernel.GrantSpec{Name: c.Name, Kind: c.Kind, Scope: scope, Audit: c.Audit, Constraints: cons, Rate: c.Rate, Allowance: allow,
			ApproveMints: c.ApproveMints})
	}
	if diags.HasErrors() {
		return nil, &Error{diags}
	}
	return grants, nil
}

func (c *Cap) grantDiag(err error) *hcl.Diagnostic {
	var fe *kernel.FieldError
	if errors.As(err, &fe) {
		if rng, ok := c.attrs[topField(fe.Field)]; ok {
			return diagErr(rng, "cap %q %q: %s", c.Kind, c.Name, fe.Error())
		}
	}
	return diagErr(c.rng, "cap %q %q: %v", c.Kind, c.Name, err)
}

// topField is the attribute a FieldError's field belongs to:
// "headers[0].env" and "headers.0.env" belong to "headers".
func topField(f string) string {
	if i := strings.IndexAny(f, ".["); i >= 0 {
		return f[:i]
	}
	return f
}

// Error positions an error about this cap block: a *kernel.FieldError at
// that attribute's value, anything else at the block.
func (c *Cap) Error(err error) error {
	return &Error{hcl.Diagnostics{c.grantDiag(err)}}
}
