// Package labelrule is how a grant says the results of a kind are
// labelled, one entry at a time: a taint for the rest of a result,
// confidentiality labels for all of it, and fields of its JSON document
// labelled apart (kindapi.Result.Parts):
//
//	{
//	  taint  = "bank:tx"                  # the rest of the result
//	  labels = ["pii:alice"]              # confidentiality of all of it
//	  fields = { "$.transactions[*].sender" = "bank:transactions.sender" }
//	}
//
// A field is a JSON path pattern (kindapi.ParsePath, [*] for any index or
// member) and its value the taint it carries instead of the result's, or
// {taint = T, labels = [...]} to give it more confidentiality tags too.
// The deepest pattern naming a place wins; two patterns of one depth that
// could name one place are a grant error. The kinds key entries their own
// way (net by path prefix, mcp by tool name); this package parses one
// entry and computes the labels of one result, so that both read it
// alike. It knows no kind.
package labelrule

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Rule is one parsed entry.
type Rule struct {
	Taint  string   // what the rest of the result carries
	Labels []string // confidentiality tags, sorted
	Fields []Field  // sorted by depth, then pattern: the deepest naming a place is last
}

// Field labels the parts of a result's JSON document a pattern names.
type Field struct {
	Pattern string // canonical (kindapi.Path.String)
	Depth   int
	Taint   string
	Labels  []string // sorted
}

// spec is an entry as a grant writes it.
type spec struct {
	Taint  *string                    `json:"taint"`
	Labels []string                   `json:"labels"`
	Fields map[string]json.RawMessage `json:"fields"`
}

// fieldSpec is a field's labels: a string (its taint) or this object.
type fieldSpec struct {
	Taint  string   `json:"taint"`
	Labels []string `json:"labels"`
}

// Parse parses one entry. field names it in errors, which are
// *kindapi.FieldError; defTaint is the taint of a result when the entry
// names none.
func Parse(raw json.RawMessage, field, defTaint string) (Rule, error) {
	fe := func(field, format string, args ...any) error {
		return &kindapi.FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	var sp spec
	if err := StrictDecode(raw, &sp); err != nil {
		return Rule{}, fe(field, "%v (want {taint = \"...\", labels = [...], fields = {...}})", err)
	}
	r := Rule{Taint: defTaint, Labels: kindapi.NewLabel(sp.Labels, nil).Conf()}
	if sp.Taint != nil {
		if err := CheckTaint(*sp.Taint); err != nil {
			return Rule{}, fe(field+".taint", "%v", err)
		}
		r.Taint = *sp.Taint
	}
	if len(sp.Fields) > kindapi.MaxParts {
		return Rule{}, fe(field+".fields", "%d fields (max %d)", len(sp.Fields), kindapi.MaxParts)
	}
	for pat, v := range sp.Fields {
		ff := field + ".fields[" + quoteTrunc(pat) + "]"
		p, err := kindapi.ParsePath(pat, true)
		if err != nil {
			return Rule{}, fe(ff, "%v", err)
		}
		var f fieldSpec
		if err := json.Unmarshal(v, &f.Taint); err != nil {
			if err := StrictDecode(v, &f); err != nil {
				return Rule{}, fe(ff, "want a taint or {taint = \"...\", labels = [...]}: %v", err)
			}
		}
		if err := CheckTaint(f.Taint); err != nil {
			return Rule{}, fe(ff, "%v", err)
		}
		r.Fields = append(r.Fields, Field{Pattern: p.String(), Depth: len(p), Taint: f.Taint, Labels: kindapi.NewLabel(f.Labels, nil).Conf()})
	}
	slices.SortFunc(r.Fields, func(a, b Field) int {
		if a.Depth != b.Depth {
			return a.Depth - b.Depth
		}
		return strings.Compare(a.Pattern, b.Pattern)
	})
	for i := range r.Fields {
		for j := i + 1; j < len(r.Fields) && r.Fields[j].Depth == r.Fields[i].Depth; j++ {
			if a, b := r.Fields[i].Pattern, r.Fields[j].Pattern; patternsOverlap(a, b) {
				return Rule{}, fe(field+".fields", "patterns %s and %s can name the same place (say which label it carries with one pattern)", a, b)
			}
		}
	}
	return r, nil
}

// StrictDecode decodes a JSON object with no unknown or duplicated field,
// its error without abi's and encoding/json's prefixes.
func StrictDecode(b []byte, v any) error {
	if err := abi.DecodeJSON(b, v); err != nil {
		msg := err.Error()
		if _, after, ok := strings.Cut(msg, "json: "); ok {
			msg = after
		}
		return fmt.Errorf("%s", msg)
	}
	return nil
}

// CheckTaint validates a taint a grant names.
func CheckTaint(t string) error {
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

// Of is the label of a result under r, with the confidentiality tags
// base beside the entry's, and the labels of its JSON document's fields
// (none when doc is not JSON or r labels no field).
func (r *Rule) Of(base []string, doc []byte) (kindapi.Label, []kindapi.PartLabel) {
	conf := append(slices.Clone(base), r.Labels...)
	label := kindapi.NewLabel(conf, []string{r.Taint})
	if len(r.Fields) == 0 || !json.Valid(doc) {
		return label, nil
	}
	parts := make([]kindapi.PartLabel, len(r.Fields))
	for i, f := range r.Fields {
		parts[i] = kindapi.PartLabel{Pattern: f.Pattern, Label: kindapi.NewLabel(append(slices.Clone(conf), f.Labels...), []string{f.Taint})}
	}
	return label, parts
}

// Bound is the join of every label a result under r can carry, with the
// confidentiality tags base.
func (r *Rule) Bound(base []string) kindapi.Label {
	conf := append(slices.Clone(base), r.Labels...)
	l := kindapi.NewLabel(conf, []string{r.Taint})
	for _, f := range r.Fields {
		l = l.Join(kindapi.NewLabel(append(slices.Clone(conf), f.Labels...), []string{f.Taint}))
	}
	return l
}

// Equal reports whether two parsed entries are the same.
func Equal(x, y Rule) bool {
	return x.Taint == y.Taint && slices.Equal(x.Labels, y.Labels) &&
		slices.EqualFunc(x.Fields, y.Fields, func(f, g Field) bool {
			return f.Pattern == g.Pattern && f.Taint == g.Taint && slices.Equal(f.Labels, g.Labels)
		})
}

// JSON is an entry in a scope's JSON form, the spelling a grant takes.
type JSON struct {
	Taint  string               `json:"taint"`
	Labels []string             `json:"labels"`
	Fields map[string]FieldJSON `json:"fields"`
}

// FieldJSON is a field of JSON.
type FieldJSON struct {
	Taint  string   `json:"taint"`
	Labels []string `json:"labels"`
}

// JSON returns r in its JSON form.
func (r *Rule) JSON() JSON {
	fs := make(map[string]FieldJSON, len(r.Fields))
	for _, f := range r.Fields {
		fs[f.Pattern] = FieldJSON{Taint: f.Taint, Labels: nonNil(slices.Clone(f.Labels))}
	}
	return JSON{Taint: r.Taint, Labels: nonNil(slices.Clone(r.Labels)), Fields: fs}
}

// Describe writes r for a person after its key:
//
//	taint bank:tx, labels pii:alice; $.transactions[*].sender: taint bank:transactions.sender
func (r *Rule) Describe(b *strings.Builder) {
	labelled := func(taint string, labels []string) {
		b.WriteString("taint " + taint)
		if len(labels) > 0 {
			b.WriteString(", labels " + strings.Join(labels, ","))
		}
	}
	labelled(r.Taint, r.Labels)
	for _, f := range r.Fields {
		b.WriteString("; " + f.Pattern + ": ")
		labelled(f.Taint, f.Labels)
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// quoteTrunc quotes s for a message, cut at 120 bytes.
func quoteTrunc(s string) string {
	const max = 120
	if len(s) > max {
		s = s[:max] + "..."
	}
	return strconv.Quote(s)
}
