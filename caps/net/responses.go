package net

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/mandatevm/mandate/guest-sdk/abi"
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

// responseSpec is one responses entry of a grant spec.
type responseSpec struct {
	Taint  *string                    `json:"taint"`
	Labels []string                   `json:"labels"`
	Fields map[string]json.RawMessage `json:"fields"`
}

// fieldSpec is a field's labels: a string (its taint) or this object.
type fieldSpec struct {
	Taint  string   `json:"taint"`
	Labels []string `json:"labels"`
}

// responseRule is a parsed responses entry.
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
		var sp responseSpec
		if err := strictDecode(raw[key], &sp); err != nil {
			return nil, fe(field, "%v (want {taint = \"...\", labels = [...], fields = {...}})", err)
		}
		r := responseRule{prefix: prefix, taint: "web:" + o.String(), labels: kindapi.NewLabel(sp.Labels, nil).Conf()}
		if sp.Taint != nil {
			if err := checkTaint(*sp.Taint); err != nil {
				return nil, fe(field+".taint", "%v", err)
			}
			r.taint = *sp.Taint
		}
		if len(sp.Fields) > kindapi.MaxParts {
			return nil, fe(field+".fields", "%d fields (max %d)", len(sp.Fields), kindapi.MaxParts)
		}
		for pat, v := range sp.Fields {
			ff := field + ".fields[" + quoteTrunc(pat) + "]"
			p, err := kindapi.ParsePath(pat, true)
			if err != nil {
				return nil, fe(ff, "%v", err)
			}
			var f fieldSpec
			if err := json.Unmarshal(v, &f.Taint); err != nil {
				if err := strictDecode(v, &f); err != nil {
					return nil, fe(ff, "want a taint or {taint = \"...\", labels = [...]}: %v", err)
				}
			}
			if err := checkTaint(f.Taint); err != nil {
				return nil, fe(ff, "%v", err)
			}
			r.fields = append(r.fields, fieldRule{pattern: p.String(), depth: len(p), taint: f.Taint, labels: kindapi.NewLabel(f.Labels, nil).Conf()})
		}
		slices.SortFunc(r.fields, func(a, b fieldRule) int {
			if a.depth != b.depth {
				return a.depth - b.depth
			}
			return strings.Compare(a.pattern, b.pattern)
		})
		for i := range r.fields {
			for j := i + 1; j < len(r.fields) && r.fields[j].depth == r.fields[i].depth; j++ {
				if a, b := r.fields[i].pattern, r.fields[j].pattern; patternsOverlap(a, b) {
					return nil, fe(field+".fields", "patterns %s and %s can name the same place (say which label it carries with one pattern)", a, b)
				}
			}
		}
		for _, prev := range rules {
			if prev.prefix == prefix {
				return nil, fe(field, "path %s is given twice", prefix)
			}
		}
		rules = append(rules, r)
	}
	slices.SortFunc(rules, func(a, b responseRule) int { return strings.Compare(a.prefix, b.prefix) })
	return rules, nil
}

// strictDecode decodes a JSON object with no unknown or duplicated field.
func strictDecode(b []byte, v any) error {
	if err := abi.DecodeJSON(b, v); err != nil {
		// Drop abi's "malformed: " and encoding/json's "json: ".
		msg := err.Error()
		if _, after, ok := strings.Cut(msg, "json: "); ok {
			msg = after
		}
		return fmt.Errorf("%s", msg)
	}
	return nil
}

// checkTaint validates a taint a grant names.
func checkTaint(t string) error {
	switch {
	case t == "":
		return fmt.Errorf("a taint must not be empty")
	case len(t) > kindapi.MaxTaintPatternLen:
		return fmt.Errorf("taint %s: longer than %d bytes", quoteTrunc(t), kindapi.MaxTaintPatternLen)
	case strings.TrimSpace(t) != t || strings.ContainsFunc(t, unicode.IsControl):
		return fmt.Errorf("taint %s: surrounding space or a control character", quoteTrunc(t))
	case strings.Contains(t, "*"):
		return fmt.Errorf("taint %s: \"*\" is for refused-taint patterns, not taints", quoteTrunc(t))
	}
	return nil
}

// patternsOverlap reports whether two canonical patterns of one depth can
// name the same place: at each step one is [*] or both are the same.
func patternsOverlap(a, b string) bool {
	pa, _ := kindapi.ParsePath(a, true)
	pb, _ := kindapi.ParsePath(b, true)
	for i := range pa {
		ea, eb := pa[i:i+1].String(), pb[i:i+1].String()
		if ea != eb && ea != "$[*]" && eb != "$[*]" {
			return false
		}
	}
	return true
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
	conf := append(slices.Clone(s.respLabels), r.labels...)
	label := kindapi.NewLabel(conf, []string{r.taint})
	if len(r.fields) == 0 || !json.Valid(body) {
		return label, nil
	}
	parts := make([]kindapi.PartLabel, len(r.fields))
	for i, f := range r.fields {
		parts[i] = kindapi.PartLabel{Pattern: f.pattern, Label: kindapi.NewLabel(append(slices.Clone(conf), f.labels...), []string{f.taint})}
	}
	return label, parts
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
	for _, r := range s.responses {
		if !s.reaches(r.prefix) {
			continue
		}
		conf := append(slices.Clone(s.respLabels), r.labels...)
		l = l.Join(kindapi.NewLabel(conf, []string{r.taint}))
		for _, f := range r.fields {
			l = l.Join(kindapi.NewLabel(append(slices.Clone(conf), f.labels...), []string{f.taint}))
		}
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
		return x.prefix == y.prefix && x.taint == y.taint && slices.Equal(x.labels, y.labels) &&
			slices.EqualFunc(x.fields, y.fields, func(f, g fieldRule) bool {
				return f.pattern == g.pattern && f.taint == g.taint && slices.Equal(f.labels, g.labels)
			})
	})
}

// responseJSON is a responses entry in the scope's JSON form, the
// spelling a grant takes.
type responseJSON struct {
	Taint  string               `json:"taint"`
	Labels []string             `json:"labels"`
	Fields map[string]fieldJSON `json:"fields"`
}

type fieldJSON struct {
	Taint  string   `json:"taint"`
	Labels []string `json:"labels"`
}

func responsesJSON(rules []responseRule) map[string]responseJSON {
	if len(rules) == 0 {
		return nil
	}
	out := make(map[string]responseJSON, len(rules))
	for _, r := range rules {
		fs := make(map[string]fieldJSON, len(r.fields))
		for _, f := range r.fields {
			fs[f.pattern] = fieldJSON{Taint: f.taint, Labels: nonNil(slices.Clone(f.labels))}
		}
		out[r.prefix] = responseJSON{Taint: r.taint, Labels: nonNil(slices.Clone(r.labels)), Fields: fs}
	}
	return out
}

// describeResponses is one Detail per entry, for Describe, each named
// "responses":
//
//	/transactions: taint bank:tx, labels pii:alice; $.transactions[*].sender: taint bank:transactions.sender
func describeResponses(rules []responseRule) []kindapi.Detail {
	var out []kindapi.Detail
	labelled := func(b *strings.Builder, taint string, labels []string) {
		b.WriteString("taint " + taint)
		if len(labels) > 0 {
			b.WriteString(", labels " + strings.Join(labels, ","))
		}
	}
	for _, r := range rules {
		var b strings.Builder
		b.WriteString(r.prefix + ": ")
		labelled(&b, r.taint, r.labels)
		for _, f := range r.fields {
			b.WriteString("; " + f.pattern + ": ")
			labelled(&b, f.taint, f.labels)
		}
		out = append(out, kindapi.Detail{Name: "responses", Value: b.String()})
	}
	return out
}
