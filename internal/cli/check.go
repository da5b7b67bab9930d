package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/mandatevm/mandate/caps/data"
	"github.com/mandatevm/mandate/constraint"
	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/manifest"
	"github.com/mandatevm/mandate/sandbox"
)

const checkHelp = `Usage: mandate check MANIFEST.hcl|POLICY.hcl [--var NAME=VALUE ...] [--format text|json]

Given an MCP policy (mandate mcp serve), it checks each tool as a task of
the session's principal and clearance, and says what a session could come
to be shown (the tags of results returned by value) and which tools it
would then lose (a sink not cleared for them: refused with EFLOW).

Reports, without running anything (no engine, no guest build), what the
manifest's root task could come to hold and where it could send it. Each
capability's kind describes its grant (the static view mandate graph
shows); the report puts the descriptions together:

  task        its principal and its clearance (the manifest's task-level
              clearance, or "unbounded"); with retry, whether a fleet node
              would run it again when its node is lost, or which
              capabilities are not repeatable (a POST, a data write, a
              model call) so that a node refuses the run
  could hold  an upper bound of the confidentiality tags the task could ever
              hold, from every capability that brings data in: what its
              kind finds the grant reaches in the manifest's seed files (a
              data cap: the labels of the granted fields of the records its
              rule reaches, "$owner" being the record's owner; "own": the
              principal's records; {owners=[...]} and {ids=[...]}: those;
              {relation=R}: the owners the seeds' relations make the
              principal R of, or every record of the collection when no
              seed declares R, an over-approximation), or the labels every
              result carries (a net cap's labels). A bounded clearance caps
              it: the kernel refuses anything above it. A capability whose
              data has no seed is "unknown (no seed data)" (bounded by the
              clearance, if any). Records imported into the store otherwise
              (mandate data import) are not seen.
  sinks       every capability that sends data out (a net cap, a pay
              cap...): what it reaches, its clearance, whether it accepts
              data from untrusted sources (and which taints it refuses),
              its grant; which of those tags it
              could receive, and whether holding the others would shut it:
              the kernel refuses a task whose label is above a sink's
              clearance
  spawn       every capability that starts child tasks: its grant, modules
              as the manifest names them; children get at most what the
              parent passes them and at most the parent's clearance
  declassify  every capability of a kind that may lower labels: its grant
  other       every other capability: its grant

Each capability's line ends with the kernel's own attributes its cap block
sets, in brackets: [audit] [rate 10/s] [max_uses 1] [budget 100.00 USD]
[when ...] [approve_when ...] [history 64], the last when a constraint
reads uses: the kernel then keeps the capability's last 64 uses for it.
A grant's fields are shown name=value, as mandate graph shows them.

The cap blocks are checked by their kinds, and their constraints compiled,
as mandate run checks and compiles them, but secrets are not read (an
instrument's or header's env variable need not be set) and spawn modules
are not built.

Flags:

	--var NAME=VALUE   sets var.NAME in the manifest; repeatable
	--format FORMAT    text (default) or json

The JSON form is one object; every capability in it has "cap", "kind",
"fields" (the grant's limits as its kind describes them, in readable units)
and "kernel" (the kernel's attributes that are set):

	{"task": {"name": "trip-planner", "principal": "alice",
	          "bounded": false, "clearance": []},
	 "could_hold": ["pii:alice"],
	 "unknown": false,            // some source has no seed data and the
	                              // task is unbounded: could_hold is incomplete
	 "sources": [{"cap": "itinerary", "kind": "data",
	              "fields": [{"name": "collection", "value": "itinerary"}, ...],
	              "kernel": {},
	              "summary": "collection itinerary, records own, fields from, passport",
	              "tags": ["pii:alice"],
	              "labelled_fields": {"passport": ["pii:alice"]},
	              "above_clearance": [], "unknown": false,
	              "note": "1 seeded record(s) reachable"}],
	 "sinks": [{"cap": "airline", "kind": "net",
	            "fields": [{"name": "origin", "value": "https://..."}, ...],
	            "kernel": {"audit": true, "rate": "10/s", "max_uses": 1,
	                       "budget": "100.00 USD", "when": ["..."],
	                       "approve_when": ["..."], "history": 64},
	            "reaches": ["https://.../"], "clearance": ["pii:alice"],
	            "accepts_untrusted": true, "refuses_taints": ["web:*"],
	            "could_receive": ["pii:alice"],
	            "blocked_by": [], "safe": true, "verdict": "safe: ..."}],
	 "spawn": [{"cap": "children", "kind": "spawn",
	            "fields": [{"name": "modules", "value": "finder.wasm"}, ...],
	            "kernel": {}, "note": "..."}],
	 "declassify": [{"cap": "nationality", "kind": "declassify",
	                 "fields": [{"name": "drop", "value": "pii:alice"}, ...],
	                 "kernel": {}}],
	 "other": []}

A declassify cap lowers the labels of blobs the task hands on, never the
task's own label, so it changes none of the verdicts; it is listed last.

Exit codes:

	0    the manifest loads (whatever the report says)
	2    usage or manifest error (FILE:LINE,COL: message), or a seed file
	     that cannot be read

Examples:

	mandate check planner.hcl --var flights=https://flights.example ...
	mandate check hr.hcl --format json | jq .could_hold
`

// checkReport is what mandate check reports.
type checkReport struct {
	Task      checkTask     `json:"task"`
	CouldHold []string      `json:"could_hold"`
	Unknown   bool          `json:"unknown"`
	Sources   []checkSource `json:"sources"`
	Sinks     []checkSink   `json:"sinks"`
	Spawn     []checkSpawn  `json:"spawn"`
	// Declassify lists the capabilities of kinds that may lower labels:
	// they lower the labels of blobs the task hands on, never the task's
	// own label, so they change no verdict above.
	Declassify []checkCap `json:"declassify"`
	// Other lists the capabilities in none of the lists above.
	Other []checkCap `json:"other"`
}

type checkTask struct {
	Name      string   `json:"name"`
	Principal string   `json:"principal"`
	Bounded   bool     `json:"bounded"`
	Clearance []string `json:"clearance"`
	// Retry is the manifest's retry; NotRepeatable names each capability
	// that makes a fleet node refuse such a run, with why.
	Retry         int      `json:"retry,omitempty"`
	NotRepeatable []string `json:"not_repeatable,omitempty"`
}

// checkCap is one capability as its kind describes it, with the kernel's
// attributes of its cap block.
type checkCap struct {
	Cap    string          `json:"cap"`
	Kind   string          `json:"kind"`
	Fields []kernel.Detail `json:"fields"`
	Kernel checkKernel     `json:"kernel"`
}

// checkKernel is the kernel's own attributes of a cap block, those set.
type checkKernel struct {
	Audit       bool     `json:"audit,omitempty"`
	Rate        string   `json:"rate,omitempty"`
	MaxUses     int64    `json:"max_uses,omitempty"`
	Budget      string   `json:"budget,omitempty"`
	When        []string `json:"when,omitempty"`
	ApproveWhen []string `json:"approve_when,omitempty"`
	// History is how many uses the kernel keeps for the constraints
	// that read them (kernel.MaxHistory), 0 when none does.
	History int `json:"history,omitempty"`
}

// checkSource is a cap the task could read labelled data through.
type checkSource struct {
	checkCap
	Summary        string              `json:"summary"`
	Tags           []string            `json:"tags"`
	LabelledFields map[string][]string `json:"labelled_fields,omitempty"`
	AboveClearance []string            `json:"above_clearance"`
	Unknown        bool                `json:"unknown"`
	Note           string              `json:"note"`
}

// checkSink is a cap that sends data out.
type checkSink struct {
	checkCap
	Reaches          []string `json:"reaches"`
	Clearance        []string `json:"clearance"`
	AcceptsUntrusted bool     `json:"accepts_untrusted"`
	// RefusesTaints are the taints it refuses when it accepts others
	// (a net cap's refuses_taints); omitted when none.
	RefusesTaints []string `json:"refuses_taints,omitempty"`
	CouldReceive  []string `json:"could_receive"`
	BlockedBy     []string `json:"blocked_by"`
	Safe          bool     `json:"safe"`
	Verdict       string   `json:"verdict"`
}

// checkSpawn is a cap that starts child tasks.
type checkSpawn struct {
	checkCap
	Note string `json:"note"`
}

func runCheck(e *env, args []string) int {
	c := lookupCommand("check")
	fs := flagSet("check")
	vars := varFlag{}
	fs.Var(vars, "var", "")
	format := fs.String("format", "text", "")
	pos, code, ok := e.parse(c, fs, args)
	if !ok {
		return code
	}
	file, code, ok := e.oneArg(c, pos, "the manifest")
	if !ok {
		return code
	}
	if *format != "text" && *format != "json" {
		return e.usageError(c, "unknown format %q (formats: text, json)", *format)
	}
	m, err := manifest.Load(file, vars)
	if err != nil {
		if p, perr := manifest.LoadPolicy(file, vars); perr == nil {
			return e.checkPolicy(p, *format)
		}
		return e.manifestError(err)
	}
	ks, closeKinds := host.Kinds("")
	defer closeKinds()
	g, err := checkGrants(m, ks, host.Declassifiers)
	if err != nil {
		return e.manifestError(err)
	}
	r, err := checkManifest(m, g)
	if err != nil {
		return e.manifestError(err)
	}
	if *format == "json" {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
		return exitOK
	}
	writeCheckText(e.stdout, m, r)
	return exitOK
}

// checkedGrants is what the kinds granted a manifest's cap blocks.
type checkedGrants struct {
	// Grants are the root grants, one per cap block, in the manifest's
	// order.
	Grants []kernel.GrantSpec
	// Kinds are the kinds, by name.
	Kinds map[string]kernel.Kind
	// Declassifiers names the kinds that may lower labels.
	Declassifiers []string
	// Modules maps the placeholder digests spawn grants were given to
	// the modules the manifest names.
	Modules map[string]string
}

// checkGrants has the kinds check the cap blocks as mandate run does,
// without reading secrets or building spawn modules, and returns the
// scopes they grant.
func checkGrants(m *manifest.Manifest, ks []kernel.Kind, declassifiers []string) (*checkedGrants, error) {
	g := &checkGranter{kinds: map[string]kernel.Kind{}, modules: map[string]string{}, cc: constraint.New()}
	for _, k := range ks {
		g.kinds[k.Name()] = k
	}
	lookup := func(string) (string, bool) { return "placeholder", true }
	gc := kernel.GrantContext{Dir: m.Dir, LookupEnv: lookup}
	if m.Retry > 0 {
		gc.Seed = "mandate check" // as a fleet node grants it: keys derived from the run
	}
	grants, err := m.GrantsWith(g, gc)
	if err != nil {
		return nil, err
	}
	if len(grants) != len(m.Caps) {
		return nil, fmt.Errorf("%d grants for %d cap blocks", len(grants), len(m.Caps))
	}
	for i := range grants {
		if grants[i].Name != m.Caps[i].Name || grants[i].Kind != m.Caps[i].Kind {
			return nil, fmt.Errorf("grant %d is %s %q, not the cap block's %s %q", i, grants[i].Kind, grants[i].Name, m.Caps[i].Kind, m.Caps[i].Name)
		}
	}
	return &checkedGrants{Grants: grants, Kinds: g.kinds, Declassifiers: declassifiers, Modules: g.modules}, nil
}

// checkGranter is a manifest.Granter over the CLI's kinds that needs no
// kernel: it grants with the kinds themselves and compiles constraint
// expressions as the kernel does, with the CEL compiler mandate run uses.
type checkGranter struct {
	kinds   map[string]kernel.Kind
	modules map[string]string // placeholder digest -> module as written
	cc      *constraint.Compiler
}

func (g *checkGranter) Kind(name string) (kernel.Kind, bool) {
	k, ok := g.kinds[name]
	return k, ok
}

func (g *checkGranter) Kinds() []string {
	names := make([]string, 0, len(g.kinds))
	for n := range g.kinds {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (g *checkGranter) Grant(kind string, gc kernel.GrantContext, spec []byte) (kernel.Scope, error) {
	k := g.kinds[kind]
	if slices.Contains(k.Info().Ops, kernel.OpSpawn) {
		var err error
		if spec, err = g.placeholderModules(gc, spec); err != nil {
			return nil, err
		}
	}
	return k.Grant(gc, spec)
}

// placeholderModules rewrites the module paths of a spawn grant's
// "modules" list to placeholder digests: mandate run resolves the paths
// to the digests of the modules it builds, mandate check builds nothing.
// It checks that the paths exist, and remembers what each placeholder
// stands for. Anything it cannot read it leaves to the kind to refuse.
func (g *checkGranter) placeholderModules(gc kernel.GrantContext, spec []byte) ([]byte, error) {
	var sp struct {
		Modules []json.RawMessage `json:"modules"`
	}
	if json.Unmarshal(spec, &sp) != nil || sp.Modules == nil {
		return spec, nil
	}
	modules := sp.Modules
	for i, raw := range modules {
		var name string
		if json.Unmarshal(raw, &name) != nil || name == "" || sandbox.IsDigest(strings.ToLower(name)) {
			continue
		}
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(gc.Dir, p)
		}
		if _, err := os.Stat(p); err != nil {
			return nil, &kernel.FieldError{Field: "modules", Msg: fmt.Sprintf("module %s: %v", name, err)}
		}
		digest := fmt.Sprintf("sha256:%064x", len(g.modules)+1)
		g.modules[digest] = name
		modules[i], _ = json.Marshal(digest)
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(spec, &fields) != nil {
		return spec, nil
	}
	b, err := json.Marshal(modules)
	if err != nil {
		return spec, nil
	}
	fields["modules"] = b
	if b, err = json.Marshal(fields); err != nil {
		return spec, nil
	}
	return b, nil
}

// CompileConstraints compiles when and approve_when over the kind's
// variables (kernel.ConstraintVars) as Kernel.CompileConstraints does, so
// an expression mandate run would refuse is a manifest error here too.
func (g *checkGranter) CompileConstraints(kind string, when, approveWhen []string) (kernel.Constraints, error) {
	var cs kernel.Constraints
	k, ok := g.kinds[kind]
	if !ok {
		return cs, fmt.Errorf("unknown capability kind %q", kind)
	}
	vars := kernel.ConstraintVars(k)
	for _, src := range when {
		c, err := g.cc.Compile(src, vars)
		if err != nil {
			return kernel.Constraints{}, fmt.Errorf("when %q: %w", src, err)
		}
		cs.When = append(cs.When, c)
	}
	for _, src := range approveWhen {
		c, err := g.cc.Compile(src, vars)
		if err != nil {
			return kernel.Constraints{}, fmt.Errorf("approve_when %q: %w", src, err)
		}
		cs.ApproveWhen = append(cs.ApproveWhen, c)
	}
	return cs, nil
}

// ParseBudget reads a budget in the kind's unit, as the kernel does.
func (g *checkGranter) ParseBudget(kind string, s kernel.Scope, text string) (int64, error) {
	k, ok := g.kinds[kind]
	if !ok {
		return 0, fmt.Errorf("unknown capability kind %q", kind)
	}
	return kernel.ParseBudget(k, s, text)
}

// checkSeeds reads the manifest's seed files as the data they seed.
func checkSeeds(m *manifest.Manifest) ([]kernel.Seed, error) {
	seeds := make([]kernel.Seed, 0, len(m.Seeds))
	for i := range m.Seeds {
		s := &m.Seeds[i]
		recs, err := data.ReadFile(s.File)
		if err != nil {
			return nil, s.Error(err)
		}
		b, err := json.Marshal(recs)
		if err != nil {
			return nil, s.Error(err)
		}
		seeds = append(seeds, kernel.Seed{Collection: s.Collection, Records: b, Relations: s.Relations})
	}
	return seeds, nil
}

// checkManifest analyses a loaded manifest from what its kinds say of the
// scopes g holds.
func checkManifest(m *manifest.Manifest, g *checkedGrants) (*checkReport, error) {
	r := &checkReport{
		Task:       checkTask{Name: m.Name, Principal: m.Principal, Clearance: []string{}, Retry: m.Retry},
		CouldHold:  []string{},
		Sources:    []checkSource{},
		Sinks:      []checkSink{},
		Spawn:      []checkSpawn{},
		Declassify: []checkCap{},
		Other:      []checkCap{},
	}
	var clearance map[string]bool
	if m.Clearance != nil {
		r.Task.Bounded = true
		r.Task.Clearance = append(r.Task.Clearance, m.Clearance.Conf()...)
		clearance = setOf(r.Task.Clearance)
	}
	seeds, err := checkSeeds(m)
	if err != nil {
		return nil, err
	}

	hold := map[string]bool{}
	for i, gs := range g.Grants {
		k, ok := g.Kinds[gs.Kind]
		if !ok {
			return nil, m.Caps[i].Error(fmt.Errorf("unknown capability kind %q", gs.Kind))
		}
		d := k.Describe(gs.Scope)
		if m.Retry > 0 && !d.Repeatable {
			why := d.NotRepeatable
			if why == "" {
				why = "its kind does not say it is repeatable"
			}
			r.Task.NotRepeatable = append(r.Task.NotRepeatable, fmt.Sprintf("%s (%s): %s", gs.Name, gs.Kind, why))
		}
		c := checkCap{Cap: gs.Name, Kind: gs.Kind, Fields: g.named(d.Fields), Kernel: kernelAttrs(k, gs, &m.Caps[i])}
		listed := false

		switch conf := d.Label.Conf(); {
		case d.Reach != nil:
			reach := d.Reach(m.Principal, seeds)
			src := checkSource{checkCap: c, Summary: g.name(reach.Summary), Note: reach.Note}
			if reach.Known {
				src.Tags = sortedSet(setOf(reach.Tags))
				if len(reach.ByField) > 0 {
					src.LabelledFields = make(map[string][]string, len(reach.ByField))
					for f, ts := range reach.ByField {
						src.LabelledFields[f] = sortedSet(setOf(ts))
					}
				}
			} else {
				src.Unknown = true
				if src.Note == "" {
					src.Note = "unknown"
				}
				if r.Task.Bounded {
					src.Unknown = false
					src.Tags = append([]string{}, r.Task.Clearance...)
					src.Note += "; bounded by the task's clearance"
				}
			}
			r.addSource(src, clearance, hold)
			listed = true
		case len(conf) > 0:
			r.addSource(checkSource{checkCap: c, Summary: strings.Join(g.namedAll(d.Reaches), ", "), Tags: sortedSet(setOf(conf)),
				Note: "every response carries these labels"}, clearance, hold)
			listed = true
		}
		if d.Sink != nil {
			r.Sinks = append(r.Sinks, checkSink{checkCap: c, Reaches: nonNil(g.namedAll(d.Reaches)),
				Clearance: nonNil(d.Sink.Clearance.Conf()), AcceptsUntrusted: !d.Sink.RefusesTainted,
				RefusesTaints: d.Sink.RefusedTaints.List()})
			listed = true
		}
		if slices.Contains(k.Info().Ops, kernel.OpSpawn) {
			bound := "unbounded"
			if r.Task.Bounded {
				bound = tagSet(r.Task.Clearance)
			}
			r.Spawn = append(r.Spawn, checkSpawn{checkCap: c,
				Note: fmt.Sprintf("children get at most what the parent passes them, and at most the parent's clearance (%s)", bound)})
			listed = true
		}
		if slices.Contains(g.Declassifiers, gs.Kind) {
			r.Declassify = append(r.Declassify, c)
			listed = true
		}
		if !listed {
			r.Other = append(r.Other, c)
		}
	}
	r.CouldHold = sortedSet(hold)

	for i := range r.Sinks {
		s := &r.Sinks[i]
		cl := setOf(s.Clearance)
		s.CouldReceive, s.BlockedBy = []string{}, []string{}
		for _, t := range r.CouldHold {
			if cl[t] {
				s.CouldReceive = append(s.CouldReceive, t)
			} else {
				s.BlockedBy = append(s.BlockedBy, t)
			}
		}
		switch {
		case len(s.BlockedBy) > 0:
			s.Verdict = fmt.Sprintf("after reading %s, the task can no longer use this sink", tagSet(s.BlockedBy))
		case r.Unknown:
			s.Verdict = "unknown: the task could hold unseeded data; nothing known is above this sink's clearance"
		default:
			s.Safe = true
			s.Verdict = "safe: nothing the task could hold is above this sink's clearance"
		}
	}
	return r, nil
}

// kernelAttrs is the kernel's own attributes of a cap block.
func kernelAttrs(k kernel.Kind, gs kernel.GrantSpec, c *manifest.Cap) checkKernel {
	a := checkKernel{Audit: gs.Audit, Rate: gs.Rate.String(), MaxUses: gs.Allowance.MaxUses,
		When: c.When, ApproveWhen: c.ApproveWhen}
	if gs.Constraints.References(kernel.UsesVar) {
		a.History = kernel.MaxHistory
	}
	if gs.Allowance.Budget > 0 {
		if u := k.Info().Amounts; u != nil {
			a.Budget = u.FormatAmount(gs.Scope, gs.Allowance.Budget)
		} else {
			a.Budget = c.Budget
		}
	}
	return a
}

// named returns fields with the placeholder digests of spawn grants
// replaced by the modules the manifest names.
func (g *checkedGrants) named(fields []kernel.Detail) []kernel.Detail {
	out := make([]kernel.Detail, len(fields))
	for i, f := range fields {
		out[i] = kernel.Detail{Name: f.Name, Value: g.name(f.Value)}
	}
	return out
}

func (g *checkedGrants) namedAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = g.name(s)
	}
	return out
}

func (g *checkedGrants) name(s string) string {
	for digest, module := range g.Modules {
		s = strings.ReplaceAll(s, digest, module)
	}
	return s
}

// addSource records src, capping its tags with the task's clearance.
func (r *checkReport) addSource(src checkSource, clearance map[string]bool, hold map[string]bool) {
	if src.Tags == nil {
		src.Tags = []string{}
	}
	src.AboveClearance = []string{}
	if clearance != nil {
		kept := []string{}
		for _, t := range src.Tags {
			if clearance[t] {
				kept = append(kept, t)
			} else {
				src.AboveClearance = append(src.AboveClearance, t)
			}
		}
		src.Tags = kept
	}
	for _, t := range src.Tags {
		hold[t] = true
	}
	if src.Unknown {
		r.Unknown = true
	}
	r.Sources = append(r.Sources, src)
}

func writeCheckText(w io.Writer, m *manifest.Manifest, r *checkReport) {
	p := kernel.Printable
	fmt.Fprintf(w, "task %q (%s)\n", p(r.Task.Name), p(m.Path))
	fmt.Fprintf(w, "  principal: %s\n", p(r.Task.Principal))
	if r.Task.Bounded {
		fmt.Fprintf(w, "  clearance: %s\n", tagSet(r.Task.Clearance))
	} else {
		fmt.Fprintf(w, "  clearance: unbounded\n")
	}
	if r.Task.Retry > 0 {
		if len(r.Task.NotRepeatable) == 0 {
			attempts := "attempts"
			if r.Task.Retry == 1 {
				attempts = "attempt"
			}
			fmt.Fprintf(w, "  retry: up to %d more %s when the fleet node running it is lost; every capability is repeatable\n", r.Task.Retry, attempts)
		} else {
			fmt.Fprintf(w, "  retry: a fleet node refuses this run, since these capabilities are not repeatable:\n")
			for _, n := range r.Task.NotRepeatable {
				fmt.Fprintf(w, "    %s\n", p(n))
			}
		}
	}

	hold := tagSet(r.CouldHold)
	if r.Unknown {
		hold += " plus unknown (unseeded data)"
	}
	fmt.Fprintf(w, "\ncould hold: %s\n", hold)
	for _, s := range r.Sources {
		writeCapLine(w, s.checkCap, p(s.Summary))
		switch {
		case s.Unknown:
			fmt.Fprintf(w, "    %s\n", p(s.Note))
		case s.Note != "":
			fmt.Fprintf(w, "    %s: %s\n", p(s.Note), tagSet(s.Tags))
		default:
			fmt.Fprintf(w, "    tags: %s\n", tagSet(s.Tags))
		}
		fs := make([]string, 0, len(s.LabelledFields))
		for f := range s.LabelledFields {
			fs = append(fs, f)
		}
		sort.Strings(fs)
		for _, f := range fs {
			fmt.Fprintf(w, "    %s: %s\n", p(f), tagSet(s.LabelledFields[f]))
		}
		if len(s.AboveClearance) > 0 {
			fmt.Fprintf(w, "    refused by the task's clearance: %s\n", tagSet(s.AboveClearance))
		}
	}

	fmt.Fprintf(w, "\nsinks:\n")
	if len(r.Sinks) == 0 {
		fmt.Fprintf(w, "  none\n")
	}
	for _, s := range r.Sinks {
		head := fmt.Sprintf("clearance %s, accepts_untrusted %t", tagSet(s.Clearance), s.AcceptsUntrusted)
		if len(s.RefusesTaints) > 0 {
			head += ", refuses_taints " + tagSet(s.RefusesTaints)
		}
		if len(s.Reaches) > 0 {
			head = printableList(s.Reaches) + ", " + head
		}
		writeCapLine(w, s.checkCap, head)
		writeFields(w, s.Fields)
		fmt.Fprintf(w, "    could receive: %s\n", tagSet(s.CouldReceive))
		fmt.Fprintf(w, "    %s\n", s.Verdict)
	}

	fmt.Fprintf(w, "\nspawn:\n")
	if len(r.Spawn) == 0 {
		fmt.Fprintf(w, "  none\n")
	}
	for _, s := range r.Spawn {
		writeCapLine(w, s.checkCap, fieldsText(s.Fields))
		fmt.Fprintf(w, "    %s\n", s.Note)
	}

	if len(r.Declassify) > 0 {
		fmt.Fprintf(w, "\ndeclassify (lowers blobs the task hands on, never the task's own label):\n")
		for _, d := range r.Declassify {
			writeCapLine(w, d, fieldsText(d.Fields))
		}
	}

	if len(r.Other) > 0 {
		fmt.Fprintf(w, "\nother:\n")
		for _, c := range r.Other {
			writeCapLine(w, c, fieldsText(c.Fields))
		}
	}
}

// writeCapLine writes a capability's line: its kind, its name, what
// follows (already printable), and the kernel's attributes, each in
// brackets as mandate graph shows them.
func writeCapLine(w io.Writer, c checkCap, rest string) {
	line := fmt.Sprintf("  %s %q", kernel.Printable(c.Kind), kernel.Printable(c.Cap))
	if rest != "" {
		line += ": " + rest
	}
	fmt.Fprintln(w, line+c.Kernel.text())
}

// writeFields writes a capability's grant on a line of its own.
func writeFields(w io.Writer, fields []kernel.Detail) {
	if len(fields) > 0 {
		fmt.Fprintf(w, "    grant: %s\n", fieldsText(fields))
	}
}

// fieldsText renders a kind's fields as mandate graph does: name=value
// name="a value", escaped.
func fieldsText(fields []kernel.Detail) string {
	return viewSummary(kernel.CapView{Fields: fields})
}

// text renders the attributes set: " [audit] [rate 10/s] [max_uses 1]".
func (a checkKernel) text() string {
	var b strings.Builder
	if a.Audit {
		b.WriteString(" [audit]")
	}
	if a.Rate != "" {
		fmt.Fprintf(&b, " [rate %s]", a.Rate)
	}
	if a.MaxUses > 0 {
		fmt.Fprintf(&b, " [max_uses %d]", a.MaxUses)
	}
	if a.Budget != "" {
		fmt.Fprintf(&b, " [budget %s]", kernel.Printable(a.Budget))
	}
	if len(a.When) > 0 {
		fmt.Fprintf(&b, " [when %s]", kernel.Printable(strings.Join(a.When, " && ")))
	}
	if len(a.ApproveWhen) > 0 {
		fmt.Fprintf(&b, " [approve_when %s]", kernel.Printable(strings.Join(a.ApproveWhen, " || ")))
	}
	if a.History > 0 {
		fmt.Fprintf(&b, " [history %d]", a.History)
	}
	return b.String()
}

// printableList renders strings a kind or a manifest wrote as "a, b".
func printableList(ss []string) string { return joinPrintable(ss, ", ") }

// tagSet renders tags as {a,b}.
func tagSet(tags []string) string { return "{" + joinPrintable(tags, ",") + "}" }

// joinPrintable joins strings a kind or a manifest wrote, each made
// printable.
func joinPrintable(ss []string, sep string) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = kernel.Printable(s)
	}
	return strings.Join(out, sep)
}

func setOf(ss []string) map[string]bool {
	m := make(map[string]bool, len(ss))
	for _, s := range ss {
		m[s] = true
	}
	return m
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for s := range m {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}

// policyReport is "mandate check POLICY.hcl --format json": each tool's
// report, as a task holding its capabilities, and what the session could
// come to be shown and which tools it would then lose.
type policyReport struct {
	Session struct {
		Principal    string   `json:"principal"`
		Clearance    []string `json:"clearance"` // nil: unbounded
		CouldBeShown []string `json:"could_be_shown"`
	} `json:"session"`
	Tools map[string]*checkReport `json:"tools"`
	// Unavailable are the tools a session loses once it was shown
	// CouldBeShown, with why.
	Unavailable map[string][]string `json:"unavailable_after"`
}

// checkPolicy checks a policy: each tool as a task of the session's
// principal and clearance, with the session's seeds.
func (e *env) checkPolicy(p *manifest.Policy, format string) int {
	ks, closeKinds := host.Kinds("")
	defer closeKinds()
	rep := policyReport{Tools: map[string]*checkReport{}, Unavailable: map[string][]string{}}
	rep.Session.Principal = p.Session.Principal
	if p.Session.Clearance != nil {
		rep.Session.Clearance = nonNil(p.Session.Clearance.Conf())
	}
	shown := map[string]bool{}
	ms := map[string]*manifest.Manifest{}
	for _, t := range p.Tools {
		m := &manifest.Manifest{Path: p.Path, Dir: p.Dir, Name: t.Name, ModulePath: t.ModulePath, ModuleIsDir: t.ModuleIsDir,
			Principal: p.Session.Principal, Caps: t.Caps, Seeds: p.Session.Seeds, Clearance: p.Session.Clearance}
		g, err := checkGrants(m, ks, host.Declassifiers)
		if err != nil {
			return e.manifestError(err)
		}
		r, err := checkManifest(m, g)
		if err != nil {
			return e.manifestError(err)
		}
		rep.Tools[t.Name], ms[t.Name] = r, m
		if t.Result != manifest.ResultReference {
			for _, tag := range r.CouldHold {
				shown[tag] = true
			}
		}
	}
	rep.Session.CouldBeShown = nonNil(sortedSet(shown))
	for _, t := range p.Tools {
		for _, sk := range rep.Tools[t.Name].Sinks {
			var above []string
			for _, tag := range rep.Session.CouldBeShown {
				if !slices.Contains(sk.Clearance, tag) {
					above = append(above, tag)
				}
			}
			if len(above) > 0 {
				rep.Unavailable[t.Name] = append(rep.Unavailable[t.Name],
					fmt.Sprintf("%s %q is cleared for %s, not %s", sk.Kind, sk.Cap, tagSet(sk.Clearance), tagSet(above)))
			}
		}
	}
	if format == "json" {
		if err := writeJSON(e.stdout, rep); err != nil {
			e.errorf("%v", err)
			return exitUsage
		}
		return exitOK
	}
	w := e.stdout
	pr := kernel.Printable
	fmt.Fprintf(w, "policy %s: a session acting for %s", pr(p.Path), pr(p.Session.Principal))
	if rep.Session.Clearance != nil {
		fmt.Fprintf(w, ", cleared for %s", tagSet(rep.Session.Clearance))
	}
	fmt.Fprintf(w, "\n  could be shown: %s (results returned by value)\n", tagSet(rep.Session.CouldBeShown))
	if len(rep.Unavailable) == 0 {
		fmt.Fprintln(w, "  every tool stays available whatever the session is shown")
	}
	for _, t := range p.Tools {
		for _, why := range rep.Unavailable[t.Name] {
			fmt.Fprintf(w, "  once it was shown that, %s is refused (EFLOW): %s\n", pr(t.Name), pr(why))
		}
	}
	for _, t := range p.Tools {
		fmt.Fprintf(w, "\n== tool %s\n", pr(t.Name))
		writeCheckText(w, ms[t.Name], rep.Tools[t.Name])
	}
	return exitOK
}
