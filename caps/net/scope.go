package net

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/mandatevm/mandate/caps/internal/labelrule"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Scope is what a net capability allows: one origin, some methods, some
// path prefixes, size and time limits, whether private addresses may be
// dialed, and the headers the kernel injects. It is immutable once minted:
// its fields are unexported and accessors return copies.
//
// Its JSON form (MarshalJSON) lists everything but secret values: injected
// headers appear by name only.
type Scope struct {
	origin       origin
	methods      []string // sorted, deduplicated, upper case
	paths        []string // sorted, deduplicated, canonical prefixes
	maxRequest   int64
	maxResponse  int64
	timeout      time.Duration
	maxRedirects int
	allowPrivate bool
	clearance    kindapi.Label         // what may be sent: confidentiality tags only
	refuseTaint  bool                  // accepts_untrusted = false
	refused      kindapi.TaintPatterns // refuses_taints
	respLabels   []string              // confidentiality every response carries (sorted)
	// responses label responses by path prefix and their fields by JSON
	// path (responses.go). Sorted by prefix; inherited by every narrowing.
	responses []responseRule
	headers   []injected // sorted by name
	// reserved are the header names a guest may not set: every header
	// injected here or by an ancestor (a header dropped by narrowing stays
	// reserved, so dropping it never lets the guest supply its own).
	// Sorted; a superset of the names in headers.
	reserved []string
}

var _ kindapi.Scope = (*Scope)(nil)

// Origin returns the canonical origin, e.g. "https://flights.example".
func (s *Scope) Origin() string { return s.origin.String() }

// Methods returns the allowed methods, sorted.
func (s *Scope) Methods() []string { return slices.Clone(s.methods) }

// Paths returns the allowed path prefixes, canonical and sorted.
func (s *Scope) Paths() []string { return slices.Clone(s.paths) }

// MaxRequestBytes bounds a request body.
func (s *Scope) MaxRequestBytes() int64 { return s.maxRequest }

// MaxResponseBytes bounds a response body.
func (s *Scope) MaxResponseBytes() int64 { return s.maxResponse }

// Timeout bounds a whole fetch, redirects and body included.
func (s *Scope) Timeout() time.Duration { return s.timeout }

// MaxRedirects is how many in-scope redirects a fetch follows.
func (s *Scope) MaxRedirects() int { return s.maxRedirects }

// SinkClearance is the sink's clearance (the prepared op's kindapi.Sink):
// the confidentiality tags that may flow to this origin (none by default:
// public data only).
func (s *Scope) SinkClearance() (kindapi.Label, bool) { return s.clearance, true }

// AllowPrivate reports whether private, loopback and link-local addresses
// may be dialed.
func (s *Scope) AllowPrivate() bool { return s.allowPrivate }

// HeaderNames returns the names of the injected headers, sorted.
func (s *Scope) HeaderNames() []string {
	n := make([]string, len(s.headers))
	for i, h := range s.headers {
		n[i] = h.name
	}
	return n
}

// ReservedHeaders returns the header names a guest may not set: the
// injected ones and those dropped by narrowing. Sorted.
func (s *Scope) ReservedHeaders() []string { return slices.Clone(s.reserved) }

// Label returns the label of what this scope fetches where no responses
// entry names the path: the integrity taint web:<origin> and the
// confidentiality tags of labels.
func (s *Scope) Label() kindapi.Label {
	return kindapi.NewLabel(s.respLabels, []string{"web:" + s.origin.String()})
}

// RefusesTainted reports accepts_untrusted = false (kindapi.Sink).
func (s *Scope) RefusesTainted() bool { return s.refuseTaint }

// RefusedTaints returns the refuses_taints patterns, sorted.
func (s *Scope) RefusedTaints() []string { return s.refused.List() }

// sink is what the scope's requests are sent to, for the kernel's flow
// check.
func (s *Scope) sink() *kindapi.Sink {
	return &kindapi.Sink{Clearance: s.clearance, RefusesTainted: s.refuseTaint, RefusedTaints: s.refused}
}

type scopeJSON struct {
	Origin           string                    `json:"origin"`
	Methods          []string                  `json:"methods"`
	Paths            []string                  `json:"paths"`
	MaxRequestBytes  int64                     `json:"max_request_bytes"`
	MaxResponseBytes int64                     `json:"max_response_bytes"`
	Timeout          string                    `json:"timeout"`
	MaxRedirects     int                       `json:"max_redirects"`
	AllowPrivate     bool                      `json:"allow_private"`
	Headers          []string                  `json:"headers"`
	ReservedHeaders  []string                  `json:"reserved_headers"`
	Clearance        []string                  `json:"clearance"`
	AcceptsUntrusted bool                      `json:"accepts_untrusted"`
	RefusesTaints    []string                  `json:"refuses_taints,omitempty"`
	Labels           []string                  `json:"labels"`
	Responses        map[string]labelrule.JSON `json:"responses,omitempty"`
}

// MarshalJSON renders the scope without secrets (refuses_taints and
// responses only when set):
//
//	{"origin":"https://flights.example","methods":["GET"],"paths":["/search"],
//	 "max_request_bytes":1048576,"max_response_bytes":10485760,"timeout":"30s",
//	 "max_redirects":5,"allow_private":false,"headers":["Authorization"],
//	 "reserved_headers":["Authorization"],"clearance":[],"accepts_untrusted":true,
//	 "refuses_taints":["web:*"],"labels":[],
//	 "responses":{"/transactions":{"taint":"bank:tx","labels":[],
//	   "fields":{"$.transactions[*].sender":{"taint":"bank:transactions.sender","labels":[]}}}}}
func (s *Scope) MarshalJSON() ([]byte, error) {
	return json.Marshal(scopeJSON{
		Origin:           s.Origin(),
		Methods:          nonNil(s.Methods()),
		Paths:            nonNil(s.Paths()),
		MaxRequestBytes:  s.maxRequest,
		MaxResponseBytes: s.maxResponse,
		Timeout:          s.timeout.String(),
		MaxRedirects:     s.maxRedirects,
		AllowPrivate:     s.allowPrivate,
		Headers:          nonNil(s.HeaderNames()),
		ReservedHeaders:  nonNil(s.ReservedHeaders()),
		Clearance:        nonNil(s.clearance.Conf()),
		AcceptsUntrusted: !s.refuseTaint,
		RefusesTaints:    s.refused.List(),
		Labels:           nonNil(slices.Clone(s.respLabels)),
		Responses:        responsesJSON(s.responses), // nil when none
	})
}

func nonNil(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

// String renders the scope's JSON form, so that printing a scope with any
// fmt verb shows no secret.
func (s *Scope) String() string {
	b, err := s.MarshalJSON()
	if err != nil {
		return "net.Scope{?}"
	}
	return string(b)
}

// GoString is String: %#v must not reveal secrets either.
func (s *Scope) GoString() string { return s.String() }

// Contains reports whether every request other allows, s allows: same
// origin; other's methods a subset; each of other's prefixes within one of
// s's; limits no larger; private addresses only if s allows them; refused
// taints covering s's; response labels the same; injected headers a
// subset (same name and value); reserved names a superset.
func (s *Scope) Contains(o kindapi.Scope) bool {
	other, ok := o.(*Scope)
	if !ok || s == nil || other == nil {
		return false
	}
	if other.origin != s.origin {
		return false
	}
	for _, m := range other.methods {
		if !slices.Contains(s.methods, m) {
			return false
		}
	}
	for _, p := range other.paths {
		if !pathAllowed(s.paths, p) {
			return false
		}
	}
	if other.maxRequest > s.maxRequest || other.maxResponse > s.maxResponse ||
		other.timeout > s.timeout || other.maxRedirects > s.maxRedirects {
		return false
	}
	if other.allowPrivate && !s.allowPrivate {
		return false
	}
	if !other.clearance.CanFlowTo(s.clearance) {
		return false
	}
	if s.refuseTaint && !other.refusesAll() {
		return false
	}
	if !other.refusesAll() && !other.refused.Covers(s.refused) {
		return false
	}
	if !equalResponses(s.responses, other.responses) {
		return false
	}
	for _, l := range s.respLabels {
		if !slices.Contains(other.respLabels, l) {
			return false
		}
	}
	for _, h := range other.headers {
		if !slices.ContainsFunc(s.headers, func(p injected) bool { return p.name == h.name && p.value.Equal(h.value) }) {
			return false
		}
	}
	for _, r := range s.reserved {
		if !slices.Contains(other.reserved, r) {
			return false
		}
	}
	return true
}

// refusesAll reports whether the scope refuses every taint: accepts_untrusted
// = false, or a refused taint "*".
func (s *Scope) refusesAll() bool {
	return s.refuseTaint || slices.Contains(s.refused.List(), "*")
}

// reservedHeader reports whether a guest may not set header name
// (canonical form).
func (s *Scope) reservedHeader(name string) bool {
	_, ok := slices.BinarySearch(s.reserved, name)
	return ok
}
