package net

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mandatevm/mandate/caps/internal/labelrule"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Labels by path and by field. A grant may say how the responses under a
// path prefix are labelled, instead of the web:<origin> taint every
// response carries otherwise, and label fields of their JSON bodies apart:
//
//	responses = {
//	  "/transactions" = {
//	    taint  = "bank:tx"                  # the rest of the response
//	    labels = ["pii:alice"]              # confidentiality of all of it
//	    fields = { "$.transactions[*].sender" = "bank:transactions.sender" }
//	  }
//	}
//
// A field is a JSON path pattern (kindapi.ParsePath, [*] for any index or
// member) into the response body, and its value the taint it carries
// instead of the response's, or {taint = T, labels = [...]} to give it
// more confidentiality tags too. The longest prefix naming the path of the
// response (the last hop of a redirect) wins. Its fetch returns a blob
// labelled {labels of the scope and the entry, taint} whose fields carry
// {those labels and the field's, the field's taint} (kindapi.Result.Parts):
// a task that splices only the sender by part (abi.HTTPRequest.SpliceParts)
// passes on only bank:transactions.sender; one that reads the blob carries
// all of them. A body that is not JSON carries the entry's taint on all of
// it. The deepest pattern naming a place wins; two patterns of one depth
// that could name one place are a grant error.
//
// Responses are inherited: a narrowing request may repeat them, never
// change them (a different taint is not narrower, it is another label).

// MaxResponseRules bounds a grant's responses entries.
const MaxResponseRules = MaxPaths

// responseRule is a parsed responses entry: its prefix and its labels
// (labelrule, which the mcp kind's results share).
type responseRule struct {
	prefix string   // canonical path prefix
	taint  string   // what the rest of the response carries
	labels []string // confidentiality tags, sorted (beyond the scope's labels)
	fields []fieldRule
}

// fieldRule labels the parts of a response's JSON body a pattern names.
// A rule's fields are sorted by depth, then pattern, so that the deepest
// pattern naming a place is the last (kindapi.Blob.PartLabel takes the
// last).
type fieldRule struct {
	pattern string // canonical (kindapi.Path.String)
	depth   int
	taint   string
	labels  []string // sorted
}

// ruleOf is a responses entry as labelrule parsed it.
func ruleOf(prefix string, r labelrule.Rule) responseRule {
	out := responseRule{prefix: prefix, taint: r.Taint, labels: r.Labels}
	for _, f := range r.Fields {
		out.fields = append(out.fields, fieldRule{pattern: f.Pattern, depth: f.Depth, taint: f.Taint, labels: f.Labels})
	}
	return out
}

// rule is the entry's labels as labelrule reads them.
func (r *responseRule) rule() labelrule.Rule {
	out := labelrule.Rule{Taint: r.taint, Labels: r.labels}
	for _, f := range r.fields {
		out.Fields = append(out.Fields, labelrule.Field{Pattern: f.pattern, Depth: f.depth, Taint: f.taint, Labels: f.labels})
	}
	return out
}

// parseResponses parses a grant's or a narrowing request's responses.
// origin is the default taint's origin. Errors are *kindapi.FieldError
// naming the entry.
func parseResponses(raw map[string]json.RawMessage, o origin) ([]responseRule, error) {
	fe := func(field, format string, args ...any) error {
		return &kindapi.FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if len(raw) > MaxResponseRules {
		return nil, fe("responses", "%d entries (max %d)", len(raw), MaxResponseRules)
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	rules := make([]responseRule, 0, len(raw))
	for _, key := range keys {
		field := "responses[" + quoteTrunc(key) + "]"
		prefix, err := canonPrefix(key)
		if err != nil {
			return nil, fe(field, "path %v", err)
		}
		r, err := labelrule.Parse(raw[key], field, "web:"+o.String())
		if err != nil {
			return nil, err
		}
		for _, prev := range rules {
			if prev.prefix == prefix {
				return nil, fe(field, "path %s is given twice", prefix)
			}
		}
		rules = append(rules, ruleOf(prefix, r))
	}
	slices.SortFunc(rules, func(a, b responseRule) int { return strings.Compare(a.prefix, b.prefix) })
	return rules, nil
}

// responseRuleFor is the entry whose prefix is the longest naming the
// canonical path, or nil.
func (s *Scope) responseRuleFor(path string) *responseRule {
	var best *responseRule
	for i := range s.responses {
		r := &s.responses[i]
		if pathWithin(r.prefix, path) && (best == nil || len(r.prefix) > len(best.prefix)) {
			best = r
		}
	}
	return best
}

// responseLabels is the label of a response fetched from the canonical
// path, and the labels of its body's fields: the scope's Label and no
// parts when no responses entry names the path.
func (s *Scope) responseLabels(path string, body []byte) (kindapi.Label, []kindapi.PartLabel) {
	r := s.responseRuleFor(path)
	if r == nil {
		return s.Label(), nil
	}
	rule := r.rule()
	return rule.Of(s.respLabels, body)
}

// labelBound is an upper bound of what the scope's responses carry (for
// Describe): the scope's Label unless every allowed path is under a
// responses entry, joined with every entry's and field's labels.
func (s *Scope) labelBound() kindapi.Label {
	var l kindapi.Label
	for _, p := range s.paths {
		if !coveredPrefix(s.responses, p) {
			l = s.Label()
			break
		}
	}
	for i := range s.responses {
		r := &s.responses[i]
		if !s.reaches(r.prefix) {
			continue
		}
		rule := r.rule()
		l = l.Join(rule.Bound(s.respLabels))
	}
	return l
}

// coveredPrefix reports whether every path under the allowed prefix p is
// under some entry's prefix.
func coveredPrefix(rules []responseRule, p string) bool {
	for _, r := range rules {
		if pathWithin(r.prefix, p) {
			return true
		}
	}
	return false
}

// reaches reports whether some allowed path can be under prefix pre.
func (s *Scope) reaches(pre string) bool {
	for _, p := range s.paths {
		if pathWithin(p, pre) || pathWithin(pre, p) {
			return true
		}
	}
	return false
}

// equalResponses reports whether two parsed responses are the same.
func equalResponses(a, b []responseRule) bool {
	return slices.EqualFunc(a, b, func(x, y responseRule) bool {
		return x.prefix == y.prefix && labelrule.Equal(x.rule(), y.rule())
	})
}

// responsesJSON is the responses in the scope's JSON form, the spelling a
// grant takes.
func responsesJSON(rules []responseRule) map[string]labelrule.JSON {
	if len(rules) == 0 {
		return nil
	}
	out := make(map[string]labelrule.JSON, len(rules))
	for i := range rules {
		rule := rules[i].rule()
		out[rules[i].prefix] = rule.JSON()
	}
	return out
}

// describeResponses is one Detail per entry, for Describe, each named
// "responses":
//
//	/transactions: taint bank:tx, labels pii:alice; $.transactions[*].sender: taint bank:transactions.sender
func describeResponses(rules []responseRule) []kindapi.Detail {
	var out []kindapi.Detail
	for i := range rules {
		var b strings.Builder
		b.WriteString(rules[i].prefix + ": ")
		rule := rules[i].rule()
		rule.Describe(&b)
		out = append(out, kindapi.Detail{Name: "responses", Value: b.String()})
	}
	return out
}
