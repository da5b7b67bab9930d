package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mandatevm/mandate/caps/data"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/manifest"
	"github.com/mandatevm/mandate/sandbox"
)

const checkHelp = `Usage: mandate check MANIFEST.hcl [--var NAME=VALUE ...] [--format text|json]

Reports, without running anything (no engine, no guest build), what the
manifest's root task could come to hold and where it could send it:

  task        its principal and its clearance (the manifest's task-level
              clearance, or "unbounded")
  could hold  an upper bound of the confidentiality tags the task could ever
              hold: for each data cap, the labels of the granted fields of
              the records its rule reaches in the manifest's seed files
              ("$owner" is the record's owner; "own": the principal's
              records; {owners=[...]} and {ids=[...]}: those; {relation=R}:
              the owners the seeds' relations make the principal R of, or
              every record of the collection when no seed declares R, an
              over-approximation); plus each net cap's labels. A bounded
              clearance caps it: the kernel refuses anything above it. A
              data cap whose collection has no seed is "unknown (no seed
              data)" (bounded by the clearance, if any). Records imported
              into the store otherwise (mandate data import) are not seen.
  sinks       each net cap (origin, clearance, accepts_untrusted) and pay cap
              (provider, payees, clearance): which of those tags it could
              receive, and whether holding the others would shut it: the
              kernel refuses a task whose label is above a sink's clearance
  spawn       each spawn cap's modules; children get at most what the
              parent passes them and at most the parent's clearance

The cap blocks are checked by their kinds as mandate run checks them, but
secrets are not read (an instrument's or header's env variable need not be
set) and spawn modules are not built.

Flags:

	--var NAME=VALUE   sets var.NAME in the manifest; repeatable
	--format FORMAT    text (default) or json

The JSON form is one object:

	{"task": {"name": "trip-planner", "principal": "alice",
	          "bounded": false, "clearance": []},
	 "could_hold": ["pii:alice"],
	 "unknown": false,            // some data cap has no seed data and the
	                              // task is unbounded: could_hold is incomplete
	 "sources": [{"cap": "itinerary", "kind": "data", "collection": "itinerary",
	              "records": "own", "fields": ["from", "passport"],
	              "labelled_fields": {"passport": ["pii:alice"]},
	              "tags": ["pii:alice"], "above_clearance": [],
	              "unknown": false, "note": ""}],
	 "sinks": [{"cap": "airline", "kind": "net", "origin": "https://...",
	            "accepts_untrusted": true,           // net only
	            "provider": "...", "payees": [...],  // pay only
	            "clearance": ["pii:alice"], "could_receive": ["pii:alice"],
	            "blocked_by": [], "safe": true, "verdict": "safe: ..."}],
	 "spawn": [{"cap": "children", "modules": ["finder"], "max_children": 2,
	            "note": "..."}],
	 "declassify": [{"cap": "nationality", "drop": ["pii:alice"],
	                 "project": ["fields.nationality"]}]}

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
	// Declassify lists the declassify caps: they lower the labels of
	// blobs the task hands on, never the task's own label, so they change
	// no verdict above.
	Declassify []checkDeclassify `json:"declassify"`
}

type checkDeclassify struct {
	Cap     string   `json:"cap"`
	Drop    []string `json:"drop"`
	Project []string `json:"project,omitempty"`
}

type checkTask struct {
	Name      string   `json:"name"`
	Principal string   `json:"principal"`
	Bounded   bool     `json:"bounded"`
	Clearance []string `json:"clearance"`
}

// checkSource is a cap the task could read labelled data through.
type checkSource struct {
	Cap            string              `json:"cap"`
	Kind           string              `json:"kind"`
	Collection     string              `json:"collection,omitempty"`
	Records        string              `json:"records,omitempty"`
	Fields         []string            `json:"fields,omitempty"`
	LabelledFields map[string][]string `json:"labelled_fields,omitempty"`
	Tags           []string            `json:"tags"`
	AboveClearance []string            `json:"above_clearance"`
	Unknown        bool                `json:"unknown"`
	Note           string              `json:"note"`
}

type checkSink struct {
	Cap              string   `json:"cap"`
	Kind             string   `json:"kind"`
	Origin           string   `json:"origin,omitempty"`
	AcceptsUntrusted *bool    `json:"accepts_untrusted,omitempty"`
	Provider         string   `json:"provider,omitempty"`
	Payees           []string `json:"payees,omitempty"`
	Clearance        []string `json:"clearance"`
	CouldReceive     []string `json:"could_receive"`
	BlockedBy        []string `json:"blocked_by"`
	Safe             bool     `json:"safe"`
	Verdict          string   `json:"verdict"`
}

type checkSpawn struct {
	Cap         string   `json:"cap"`
	Modules     []string `json:"modules"`
	MaxChildren any      `json:"max_children,omitempty"`
	Note        string   `json:"note"`
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
		return e.manifestError(err)
	}
	if err := checkGrants(m); err != nil {
		return e.manifestError(err)
	}
	r, err := checkManifest(m)
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

// checkGrants has the kinds check the cap blocks as mandate run does,
// without reading secrets or building spawn modules.
func checkGrants(m *manifest.Manifest) error {
	ks, closeKinds := kindsFor("")
	defer closeKinds()
	g := &checkGranter{kinds: map[string]kernel.Kind{}}
	for _, k := range ks {
		g.kinds[k.Name()] = k
	}
	lookup := func(string) (string, bool) { return "placeholder", true }
	_, err := m.GrantsWith(g, kernel.GrantContext{Dir: m.Dir, LookupEnv: lookup})
	return err
}

// checkGranter is a manifest.Granter over the CLI's kinds that needs no
// kernel: it grants with the kinds themselves and leaves constraint
// expressions to mandate run.
type checkGranter struct {
	kinds map[string]kernel.Kind
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
	if kind == "spawn" {
		// Module paths are resolved to digests by mandate run; check the
		// paths exist and hand the kind placeholder digests.
		var s map[string]any
		if err := json.Unmarshal(spec, &s); err == nil {
			if list, ok := s["modules"].([]any); ok {
				out := make([]any, len(list))
				for i, v := range list {
					str, _ := v.(string)
					out[i] = v
					if str == "" || sandbox.IsDigest(strings.ToLower(str)) {
						continue
					}
					p := str
					if !filepath.IsAbs(p) {
						p = filepath.Join(gc.Dir, p)
					}
					if _, err := os.Stat(p); err != nil {
						return nil, &kernel.FieldError{Field: "modules", Msg: fmt.Sprintf("module %s: %v", str, err)}
					}
					out[i] = fmt.Sprintf("sha256:%064x", i+1)
				}
				s["modules"] = out
				if b, err := json.Marshal(s); err == nil {
					spec = b
				}
			}
		}
	}
	return g.kinds[kind].Grant(gc, spec)
}

func (g *checkGranter) CompileConstraints(kind string, when, approveWhen []string) (kernel.Constraints, error) {
	return kernel.Constraints{}, nil
}

// ParseBudget reads a budget in the kind's unit, as the kernel does.
func (g *checkGranter) ParseBudget(kind string, s kernel.Scope, text string) (int64, error) {
	k, ok := g.kinds[kind]
	if !ok {
		return 0, fmt.Errorf("unknown capability kind %q", kind)
	}
	return kernel.ParseBudget(k, s, text)
}

// checkManifest analyses a loaded manifest.
func checkManifest(m *manifest.Manifest) (*checkReport, error) {
	r := &checkReport{
		Task:      checkTask{Name: m.Name, Principal: m.Principal, Clearance: []string{}},
		CouldHold: []string{},
		Sources:   []checkSource{},
		Sinks:     []checkSink{},
		Spawn:     []checkSpawn{},

		Declassify: []checkDeclassify{},
	}
	var clearance map[string]bool
	if m.Clearance != nil {
		r.Task.Bounded = true
		r.Task.Clearance = append(r.Task.Clearance, m.Clearance.Conf()...)
		clearance = setOf(r.Task.Clearance)
	}

	// The seeds: records by collection (later files replace same ids),
	// and the relation edges they declare.
	records := map[string]map[string]data.Record{}
	edges := map[string]map[string]map[string]bool{} // relation -> subject -> owners
	for i := range m.Seeds {
		s := &m.Seeds[i]
		recs, err := readRecords(s.File)
		if err != nil {
			return nil, s.Error(err)
		}
		if records[s.Collection] == nil {
			records[s.Collection] = map[string]data.Record{}
		}
		for _, rec := range recs {
			records[s.Collection][rec.ID] = rec
			for field, rel := range s.Relations {
				for _, subj := range jsonStrings(rec.Fields[field]) {
					if edges[rel] == nil {
						edges[rel] = map[string]map[string]bool{}
					}
					if edges[rel][subj] == nil {
						edges[rel][subj] = map[string]bool{}
					}
					edges[rel][subj][rec.Owner] = true
				}
			}
		}
	}

	hold := map[string]bool{}
	for _, c := range m.Caps {
		var spec map[string]any
		if err := json.Unmarshal(c.Spec, &spec); err != nil {
			return nil, c.Error(err)
		}
		switch c.Kind {
		case "data":
			src := checkData(c.Name, spec, m.Principal, records, edges)
			if src.Unknown && r.Task.Bounded {
				src.Unknown = false
				src.Tags = append([]string{}, r.Task.Clearance...)
				src.Note = "unknown (no seed data); bounded by the task's clearance"
			}
			r.addSource(src, clearance, hold)
		case "net":
			if tags := specStrings(spec["labels"]); len(tags) > 0 {
				r.addSource(checkSource{Cap: c.Name, Kind: "net", Tags: sortedSet(setOf(tags)), Note: "every response carries these labels"}, clearance, hold)
			}
			sink := checkSink{Cap: c.Name, Kind: "net", Clearance: sortedSet(setOf(specStrings(spec["clearance"])))}
			sink.Origin, _ = spec["origin"].(string)
			untrusted := true
			if b, ok := spec["accepts_untrusted"].(bool); ok {
				untrusted = b
			}
			sink.AcceptsUntrusted = &untrusted
			r.Sinks = append(r.Sinks, sink)
		case "pay":
			sink := checkSink{Cap: c.Name, Kind: "pay", Clearance: sortedSet(setOf(specStrings(spec["clearance"]))), Payees: specStrings(spec["payees"])}
			sink.Provider, _ = spec["provider"].(string)
			r.Sinks = append(r.Sinks, sink)
		case "spawn":
			sp := checkSpawn{Cap: c.Name, Modules: specStrings(spec["modules"]), MaxChildren: spec["max_children"]}
			bound := "unbounded"
			if r.Task.Bounded {
				bound = tagSet(r.Task.Clearance)
			}
			sp.Note = fmt.Sprintf("children get at most what the parent passes them, and at most the parent's clearance (%s)", bound)
			r.Spawn = append(r.Spawn, sp)
		case "declassify":
			r.Declassify = append(r.Declassify, checkDeclassify{Cap: c.Name, Drop: sortedSet(setOf(specStrings(spec["drop"]))), Project: specStrings(spec["project"])})
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

// addSource records src, capping its tags with the task's clearance.
func (r *checkReport) addSource(src checkSource, clearance map[string]bool, hold map[string]bool) {
	if src.Tags == nil {
		src.Tags = []string{}
	}
	src.AboveClearance = []string{}
	if clearance != nil {
		var kept []string
		for _, t := range src.Tags {
			if clearance[t] {
				kept = append(kept, t)
			} else {
				src.AboveClearance = append(src.AboveClearance, t)
			}
		}
		if kept == nil {
			kept = []string{}
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

// checkData is what a data cap could read: the labels of its granted
// fields of the seeded records its rule reaches.
func checkData(name string, spec map[string]any, principal string, records map[string]map[string]data.Record, edges map[string]map[string]map[string]bool) checkSource {
	src := checkSource{Cap: name, Kind: "data", LabelledFields: map[string][]string{}}
	src.Collection, _ = spec["collection"].(string)
	src.Fields = specStrings(spec["fields"])
	all := len(src.Fields) == 1 && src.Fields[0] == "*"
	granted := setOf(src.Fields)

	// allow reports whether the rule reaches a record.
	var allow func(data.Record) bool
	var notes []string
	switch rule := spec["records"].(type) {
	case string:
		src.Records = rule
		allow = func(rec data.Record) bool { return principal != "" && rec.Owner == principal }
	case map[string]any:
		switch {
		case rule["relation"] != nil:
			rel, _ := rule["relation"].(string)
			src.Records = "relation " + rel
			if reach, ok := edges[rel]; ok {
				owners := reach[principal]
				allow = func(rec data.Record) bool { return owners[rec.Owner] }
			} else {
				allow = func(data.Record) bool { return true }
				notes = append(notes, fmt.Sprintf("no seed declares the relation %q: every record of the collection (an over-approximation)", rel))
			}
		case rule["owners"] != nil:
			owners := setOf(specStrings(rule["owners"]))
			src.Records = "owners " + strings.Join(sortedSet(owners), ", ")
			allow = func(rec data.Record) bool { return owners[rec.Owner] }
		case rule["ids"] != nil:
			ids := setOf(specStrings(rule["ids"]))
			src.Records = "ids " + strings.Join(sortedSet(ids), ", ")
			allow = func(rec data.Record) bool { return ids[rec.ID] }
		}
	}
	if allow == nil {
		allow = func(data.Record) bool { return true }
		notes = append(notes, "unrecognised records rule: every record of the collection (an over-approximation)")
	}

	recs, seeded := records[src.Collection]
	if !seeded {
		src.Unknown = true
		src.Tags = []string{}
		src.LabelledFields = nil
		src.Note = "unknown (no seed data)"
		return src
	}
	tags := map[string]bool{}
	byField := map[string]map[string]bool{}
	n := 0
	for _, rec := range recs {
		if !allow(rec) {
			continue
		}
		n++
		for field, ls := range rec.Labels {
			if !all && !granted[field] {
				continue
			}
			for _, t := range ls {
				t = strings.ReplaceAll(t, "$owner", rec.Owner)
				if t == "" {
					continue
				}
				tags[t] = true
				if byField[field] == nil {
					byField[field] = map[string]bool{}
				}
				byField[field][t] = true
			}
		}
	}
	for f, ts := range byField {
		src.LabelledFields[f] = sortedSet(ts)
	}
	src.Tags = sortedSet(tags)
	notes = append([]string{fmt.Sprintf("%d seeded record(s) reachable", n)}, notes...)
	src.Note = strings.Join(notes, "; ")
	return src
}

func writeCheckText(w io.Writer, m *manifest.Manifest, r *checkReport) {
	fmt.Fprintf(w, "task %q (%s)\n", r.Task.Name, m.Path)
	fmt.Fprintf(w, "  principal: %s\n", r.Task.Principal)
	if r.Task.Bounded {
		fmt.Fprintf(w, "  clearance: %s\n", tagSet(r.Task.Clearance))
	} else {
		fmt.Fprintf(w, "  clearance: unbounded\n")
	}

	hold := tagSet(r.CouldHold)
	if r.Unknown {
		hold += " plus unknown (unseeded data)"
	}
	fmt.Fprintf(w, "\ncould hold: %s\n", hold)
	for _, s := range r.Sources {
		switch s.Kind {
		case "data":
			fields := strings.Join(s.Fields, ", ")
			fmt.Fprintf(w, "  data %q: collection %s, records %s, fields %s\n", s.Cap, s.Collection, s.Records, fields)
			if s.Unknown {
				fmt.Fprintf(w, "    %s\n", s.Note)
				continue
			}
			fmt.Fprintf(w, "    %s: %s\n", s.Note, tagSet(s.Tags))
			fs := make([]string, 0, len(s.LabelledFields))
			for f := range s.LabelledFields {
				fs = append(fs, f)
			}
			sort.Strings(fs)
			for _, f := range fs {
				fmt.Fprintf(w, "    %s: %s\n", f, tagSet(s.LabelledFields[f]))
			}
		case "net":
			fmt.Fprintf(w, "  net %q: %s: %s\n", s.Cap, s.Note, tagSet(s.Tags))
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
		switch s.Kind {
		case "net":
			fmt.Fprintf(w, "  net %q: %s, clearance %s, accepts_untrusted %t\n", s.Cap, s.Origin, tagSet(s.Clearance), *s.AcceptsUntrusted)
		case "pay":
			fmt.Fprintf(w, "  pay %q: %s, payees %s, clearance %s\n", s.Cap, s.Provider, strings.Join(s.Payees, ", "), tagSet(s.Clearance))
		}
		fmt.Fprintf(w, "    could receive: %s\n", tagSet(s.CouldReceive))
		fmt.Fprintf(w, "    %s\n", s.Verdict)
	}

	fmt.Fprintf(w, "\nspawn:\n")
	if len(r.Spawn) == 0 {
		fmt.Fprintf(w, "  none\n")
	}
	for _, s := range r.Spawn {
		extra := ""
		if s.MaxChildren != nil {
			extra = fmt.Sprintf(" (max_children %v)", s.MaxChildren)
		}
		fmt.Fprintf(w, "  spawn %q: modules %s%s\n", s.Cap, strings.Join(s.Modules, ", "), extra)
		fmt.Fprintf(w, "    %s\n", s.Note)
	}

	if len(r.Declassify) > 0 {
		fmt.Fprintf(w, "\ndeclassify (lowers blobs the task hands on, never the task's own label):\n")
		for _, d := range r.Declassify {
			extra := ""
			if len(d.Project) > 0 {
				extra = ", projected onto " + strings.Join(d.Project, ", ")
			}
			fmt.Fprintf(w, "  declassify %q: drops %s%s\n", d.Cap, tagSet(d.Drop), extra)
		}
	}
}

// tagSet renders tags as {a,b}.
func tagSet(tags []string) string { return "{" + strings.Join(tags, ",") + "}" }

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

// specStrings reads a JSON string or list of strings from a decoded spec.
func specStrings(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// jsonStrings reads a field value that is a string or a list of strings.
func jsonStrings(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil
	}
	return specStrings(v)
}
