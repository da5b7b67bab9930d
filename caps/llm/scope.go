package llm

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Scope is what an llm capability allows: chat requests to one
// OpenAI-compatible endpoint, for some models, each at most max_tokens,
// within a timeout, showing the model only data its clearance admits. A
// token budget and a number of uses shared with every capability derived
// from it are the kernel's (budget and max_uses on any grant), read in
// this kind's unit: tokens (Kind.Info().Amounts).
//
// The limits are immutable once minted. The API key is held here and
// never leaves the kernel: it is not in the scope's JSON, a result, a log
// line or an error.
type Scope struct {
	endpoint     string // canonical base URL, no trailing slash
	allowPrivate bool
	models       []string // sorted, deduplicated
	key          kindapi.Secret
	keySource    string // "env:NAME" or "file:PATH"; "" without a key
	maxTokens    int64
	timeout      time.Duration
	clearance    kindapi.Label
	refusal      kindapi.Refusal // taints the provider may not be shown (accepts_untrusted, refuses_taints)
	endorse      bool
	maxRequest   int64
	maxResponse  int64
}

var _ kindapi.Scope = (*Scope)(nil)

// Endpoint returns the provider's base URL.
func (s *Scope) Endpoint() string { return s.endpoint }

// Models returns the allowed model names, sorted.
func (s *Scope) Models() []string { return slices.Clone(s.models) }

// MaxTokens returns the most tokens one answer may have.
func (s *Scope) MaxTokens() int64 { return s.maxTokens }

// Clearance is the sink's clearance: what the provider may be shown.
func (s *Scope) Clearance() kindapi.Label { return s.clearance }

// Endorses reports endorse_schema: answers to extract that validate
// against a closed schema lose their integrity taints.
func (s *Scope) Endorses() bool { return s.endorse }

// Taint is the integrity taint every answer of this provider carries.
func (s *Scope) Taint() string { return "llm:" + s.endpoint }

type scopeJSON struct {
	Endpoint         string   `json:"endpoint"`
	AllowPrivate     bool     `json:"allow_private"`
	Models           []string `json:"models"`
	APIKey           string   `json:"api_key,omitempty"` // where it was read, never the key
	MaxTokens        int64    `json:"max_tokens"`
	Timeout          string   `json:"timeout"`
	Clearance        []string `json:"clearance"`
	EndorseSchema    bool     `json:"endorse_schema"`
	MaxRequestBytes  int64    `json:"max_request_bytes"`
	MaxResponseBytes int64    `json:"max_response_bytes"`
	// Shown only when set: a scope refusing nothing renders as before.
	AcceptsUntrusted *bool    `json:"accepts_untrusted,omitempty"`
	RefusesTaints    []string `json:"refuses_taints,omitempty"`
}

// MarshalJSON renders the scope with where its key was read from, never
// the key.
func (s *Scope) MarshalJSON() ([]byte, error) {
	c := s.clearance.Conf()
	if c == nil {
		c = []string{}
	}
	j := scopeJSON{
		Endpoint: s.endpoint, AllowPrivate: s.allowPrivate, Models: s.models, APIKey: s.keySource,
		MaxTokens: s.maxTokens, Timeout: s.timeout.String(), Clearance: c, EndorseSchema: s.endorse,
		MaxRequestBytes: s.maxRequest, MaxResponseBytes: s.maxResponse, RefusesTaints: s.refusal.Taints().List(),
	}
	if !s.refusal.AcceptsUntrusted() {
		f := false
		j.AcceptsUntrusted = &f
	}
	return json.Marshal(j)
}

// Contains reports whether every call other allows, s allows: the same
// endpoint and key, models among s's, every limit at most s's, a
// clearance within s's, refusing at least the taints s refuses, and
// endorsement only where s endorses.
func (s *Scope) Contains(o kindapi.Scope) bool {
	t, ok := o.(*Scope)
	if !ok || t.endpoint != s.endpoint || t.allowPrivate && !s.allowPrivate || !t.key.Equal(s.key) {
		return false
	}
	for _, m := range t.models {
		if !slices.Contains(s.models, m) {
			return false
		}
	}
	return t.maxTokens <= s.maxTokens && t.timeout <= s.timeout && t.clearance.CanFlowTo(s.clearance) && t.refusal.Within(s.refusal) &&
		(!t.endorse || s.endorse) && t.maxRequest <= s.maxRequest && t.maxResponse <= s.maxResponse
}
