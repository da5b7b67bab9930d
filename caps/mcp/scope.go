package mcp

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mandatevm/mandate/caps/internal/labelrule"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Scope is what an mcp capability allows: calls of some tools of one
// upstream MCP server, each pinned to the definition the operator read,
// some of its resources and prompts, within a timeout and size bounds,
// showing the server only data its clearance admits. Its limits are
// immutable once minted. The header values and environment values it
// holds never leave the kernel: the scope's JSON names only where they
// were read from.
type Scope struct {
	// The server, and what identifies one connection to it.
	url          string // Streamable HTTP endpoint, or "" for stdio
	allowPrivate bool
	headers      []header
	command      []string // argv, argv[0] absolute
	env          []envVar
	dir          string
	identity     string // "https://host/mcp" or "stdio:NAME": the default taint's
	key          string // digest of everything above and frameBound
	frameBound   int64  // the grant's max_response_bytes: the connection's bound on one message

	tools       []string          // names or patterns, sorted
	pins        map[string]string // tool -> "sha256:..."
	results     []resultRule
	clearance   kindapi.Label
	refusal     kindapi.Refusal
	resources   []string
	prompts     []string
	costs       map[string]int64
	timeout     time.Duration
	maxRequest  int64
	maxResponse int64
	maxTools    int
}

var _ kindapi.Scope = (*Scope)(nil)

// Upstream is the server's identity: its url, or "stdio:" and the base
// name of its command.
func (s *Scope) Upstream() string { return s.identity }

// Tools returns the tool names and patterns the scope allows, sorted.
func (s *Scope) Tools() []string { return slices.Clone(s.tools) }

// Pins returns the scope's pins, tool name to digest.
func (s *Scope) Pins() map[string]string { return maps.Clone(s.pins) }

// Clearance is the sink's clearance: what the server may be shown.
func (s *Scope) Clearance() kindapi.Label { return s.clearance }

// Taint is the integrity taint of results no results entry names.
func (s *Scope) Taint() string { return s.defaultTaint() }

func (s *Scope) defaultTaint() string { return "mcp:" + s.identity }

// AllowsTool reports whether the scope's patterns allow the tool name.
func (s *Scope) AllowsTool(name string) bool { return matchAny(s.tools, name) }

// ruleFor is the results entry naming key ("TOOL", "resource:URI",
// "prompt:NAME") most specifically, or nil.
func (s *Scope) ruleFor(key string) *labelrule.Rule {
	var best *resultRule
	for i := range s.results {
		r := &s.results[i]
		if glob(r.pattern, key) && (best == nil || moreSpecific(r.pattern, best.pattern)) {
			best = r
		}
	}
	if best == nil {
		return nil
	}
	return &best.rule
}

// labels is the label of a result for key, and its fields' labels.
//
// A tool returning structured content also returns it as JSON text in
// its content (the MCP specification asks it to; the Go SDK does it for
// typed tools), so a field of structuredContent labelled apart would
// leave its value readable, under the entry's label only, in the text.
// So the content carries the entry's label joined with every
// structuredContent field's: a task splicing a content item carries all
// of them, one splicing only the field carries the field's.
func (s *Scope) labels(key string, doc []byte) (kindapi.Label, []kindapi.PartLabel) {
	r := s.ruleFor(key)
	if r == nil {
		return kindapi.NewLabel(nil, []string{s.defaultTaint()}), nil
	}
	label, parts := r.Of(nil, doc)
	mirror, mirrored := label, false
	for _, p := range parts {
		if strings.HasPrefix(p.Pattern, "$.content") || p.Pattern == "$" {
			return label, parts // the grant labels the content itself
		}
		if p.Pattern == "$.structuredContent" || strings.HasPrefix(p.Pattern, "$.structuredContent.") || strings.HasPrefix(p.Pattern, "$.structuredContent[") {
			mirror, mirrored = mirror.Join(p.Label), true
		}
	}
	if !mirrored {
		return label, parts
	}
	if len(parts) >= kindapi.MaxParts {
		// No room for one more part: the whole result carries the
		// mirror's label, and the fields theirs.
		return mirror, parts
	}
	// First, so that a deeper part the grant names wins where it names.
	return label, append([]kindapi.PartLabel{{Pattern: "$.content", Label: mirror}}, parts...)
}

// labelBound is an upper bound of what the scope's results carry.
func (s *Scope) labelBound() kindapi.Label {
	l := kindapi.NewLabel(nil, []string{s.defaultTaint()})
	for i := range s.results {
		l = l.Join(s.results[i].rule.Bound(nil))
	}
	return l
}

type headerJSON struct {
	Name   string `json:"name"`
	Source string `json:"source"` // where it was read, never the value
}

type scopeJSON struct {
	URL              string                    `json:"url,omitempty"`
	AllowPrivate     bool                      `json:"allow_private,omitempty"`
	Headers          []headerJSON              `json:"headers,omitempty"`
	Command          []string                  `json:"command,omitempty"`
	Env              []string                  `json:"env,omitempty"` // names only
	Dir              string                    `json:"dir,omitempty"`
	Upstream         string                    `json:"upstream"`
	Tools            []string                  `json:"tools"`
	Pins             map[string]string         `json:"pins"`
	Results          map[string]labelrule.JSON `json:"results,omitempty"`
	Clearance        []string                  `json:"clearance"`
	AcceptsUntrusted *bool                     `json:"accepts_untrusted,omitempty"`
	RefusesTaints    []string                  `json:"refuses_taints,omitempty"`
	Resources        []string                  `json:"resources,omitempty"`
	Prompts          []string                  `json:"prompts,omitempty"`
	Costs            map[string]int64          `json:"costs,omitempty"`
	Timeout          string                    `json:"timeout"`
	MaxRequestBytes  int64                     `json:"max_request_bytes"`
	MaxResponseBytes int64                     `json:"max_response_bytes"`
	MaxTools         int                       `json:"max_tools"`
}

// MarshalJSON renders the scope with where its secrets were read from,
// never their values (and the names of the environment variables a
// command is given, never their values).
func (s *Scope) MarshalJSON() ([]byte, error) {
	c := s.clearance.Conf()
	if c == nil {
		c = []string{}
	}
	j := scopeJSON{
		URL: s.url, AllowPrivate: s.allowPrivate, Command: s.command, Dir: s.dir, Upstream: s.identity,
		Tools: s.tools, Pins: s.pins, Clearance: c, RefusesTaints: s.refusal.Taints().List(),
		Resources: s.resources, Prompts: s.prompts, Timeout: s.timeout.String(),
		MaxRequestBytes: s.maxRequest, MaxResponseBytes: s.maxResponse, MaxTools: s.maxTools,
	}
	if len(s.costs) > 0 {
		j.Costs = s.costs
	}
	for _, h := range s.headers {
		j.Headers = append(j.Headers, headerJSON{Name: h.name, Source: h.source})
	}
	for _, e := range s.env {
		j.Env = append(j.Env, e.name)
	}
	if len(s.results) > 0 {
		j.Results = map[string]labelrule.JSON{}
		for i := range s.results {
			j.Results[s.results[i].pattern] = s.results[i].rule.JSON()
		}
	}
	if !s.refusal.AcceptsUntrusted() {
		f := false
		j.AcceptsUntrusted = &f
	}
	return json.Marshal(j)
}

// Contains reports whether every call other allows, s allows: the same
// server (and connection), tools, resources and prompts each within s's
// patterns, the same pins, results and costs, a clearance within s's,
// refusing at least what s refuses, and every limit at most s's.
func (s *Scope) Contains(o kindapi.Scope) bool {
	t, ok := o.(*Scope)
	if !ok || t == nil || t.key != s.key || t.identity != s.identity {
		return false
	}
	within := func(child, parent []string) bool {
		for _, c := range child {
			if !covered(parent, c) {
				return false
			}
		}
		return true
	}
	return within(t.tools, s.tools) && within(t.resources, s.resources) && within(t.prompts, s.prompts) &&
		maps.Equal(t.pins, s.pins) && maps.Equal(t.costs, s.costs) && equalResults(t.results, s.results) &&
		t.clearance.CanFlowTo(s.clearance) && t.refusal.Within(s.refusal) &&
		t.timeout <= s.timeout && t.maxRequest <= s.maxRequest && t.maxResponse <= s.maxResponse && t.maxTools <= s.maxTools
}
