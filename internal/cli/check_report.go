package cli

// mandate check's report: its JSON form, and how it is put together from
// what each kind says of the scope it granted (sources, sinks, spawn,
// declassify, what the task could come to hold).

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/mandatevm/mandate/caps/data"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/manifest"
)

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
	// Result is what the task's answer refuses and which sources' taints
	// that refuses (check_result.go); omitted when it refuses nothing.
	Result *checkResult `json:"result,omitempty"`
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
	Cap    string           `json:"cap"`
	Kind   string           `json:"kind"`
	Fields []kindapi.Detail `json:"fields"`
	Kernel checkKernel      `json:"kernel"`
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

// checkSeeds reads the manifest's seed files as the data they seed.
func checkSeeds(m *manifest.Manifest) ([]kindapi.Seed, error) {
	seeds := make([]kindapi.Seed, 0, len(m.Seeds))
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
		seeds = append(seeds, kindapi.Seed{Collection: s.Collection, Records: b, Relations: s.Relations})
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
	var taints []capTaints
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
		if integ := d.Label.Integ(); len(integ) > 0 {
			taints = append(taints, capTaints{cap: gs.Name, taints: integ})
		}
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
		if slices.Contains(k.Info().Ops, kindapi.OpSpawn) {
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
	r.Result = checkResultOf(m, taints)

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
func kernelAttrs(k kindapi.Kind, gs kernel.GrantSpec, c *manifest.Cap) checkKernel {
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
func (g *checkedGrants) named(fields []kindapi.Detail) []kindapi.Detail {
	out := make([]kindapi.Detail, len(fields))
	for i, f := range fields {
		out[i] = kindapi.Detail{Name: f.Name, Value: g.name(f.Value)}
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
