package data

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Operation names.
const (
	OpRead  = "read"
	OpQuery = "query"
	OpWrite = "write"
)

var allOps = []string{OpQuery, OpRead, OpWrite} // sorted

// Scope limits.
const (
	// MaxListLen bounds an owners, ids or fields list.
	MaxListLen = 1024
	// MaxRules bounds the chain of record rules a scope carries (one per
	// narrowing that adds a rule).
	MaxRules = 16
)

// Rule kinds.
const (
	ruleOwn      = "own"
	ruleRelation = "relation"
	ruleOwners   = "owners"
	ruleIDs      = "ids"
)

// rule is one record rule. It is resolved at use, against the calling
// task's principal.
type rule struct {
	kind     string
	relation string   // ruleRelation
	list     []string // ruleOwners, ruleIDs: sorted, deduplicated
}

func (r rule) equal(o rule) bool {
	return r.kind == o.kind && r.relation == o.relation && slices.Equal(r.list, o.list)
}

// within reports whether every record r allows (for any principal), p
// allows: the same rule, or a list rule whose list is a subset of p's.
func (r rule) within(p rule) bool {
	if r.kind != p.kind {
		return false
	}
	switch r.kind {
	case ruleOwn:
		return true
	case ruleRelation:
		return r.relation == p.relation
	}
	for _, v := range r.list {
		if _, ok := slices.BinarySearch(p.list, v); !ok {
			return false
		}
	}
	return true
}

func (r rule) MarshalJSON() ([]byte, error) {
	switch r.kind {
	case ruleOwn:
		return json.Marshal(ruleOwn)
	case ruleRelation:
		return json.Marshal(map[string]string{"relation": r.relation})
	}
	return json.Marshal(map[string][]string{r.kind: r.list})
}

// Scope is what a data capability allows: one collection, the records
// every rule of a chain allows (the root grant's rule and one per
// narrowing that added one), some fields (or all) and some operations.
// It is immutable once minted.
type Scope struct {
	collection string
	rules      []rule   // all must allow a record; never empty
	fields     []string // sorted; nil when allFields
	allFields  bool
	ops        []string // sorted
}

var _ kindapi.Scope = (*Scope)(nil)

// Collection returns the collection the scope names.
func (s *Scope) Collection() string { return s.collection }

// Fields returns the allowed fields, sorted, or ["*"] for every field.
func (s *Scope) Fields() []string {
	if s.allFields {
		return []string{"*"}
	}
	return slices.Clone(s.fields)
}

// Ops returns the allowed operations, sorted.
func (s *Scope) Ops() []string { return slices.Clone(s.ops) }

// AllowsOp reports whether op is allowed.
func (s *Scope) AllowsOp(op string) bool { return slices.Contains(s.ops, op) }

// AllowsField reports whether field f is in the slice.
func (s *Scope) AllowsField(f string) bool {
	if s.allFields {
		return true
	}
	_, ok := slices.BinarySearch(s.fields, f)
	return ok
}

// Label returns the integrity taint of what this scope reads:
// {data:<collection>}.
func (s *Scope) Label() kindapi.Label {
	return kindapi.NewLabel(nil, []string{"data:" + s.collection})
}

type scopeJSON struct {
	Collection string   `json:"collection"`
	Records    []rule   `json:"records"`
	Fields     []string `json:"fields"`
	Ops        []string `json:"ops"`
}

// MarshalJSON renders the scope, e.g.
//
//	{"collection":"benefits","records":["own",{"ids":["r1"]}],
//	 "fields":["dental","plan"],"ops":["read"]}
//
// records lists the rule chain: a record must satisfy every rule.
func (s *Scope) MarshalJSON() ([]byte, error) {
	return json.Marshal(scopeJSON{Collection: s.collection, Records: s.rules, Fields: s.Fields(), Ops: s.Ops()})
}

// String renders the JSON form.
func (s *Scope) String() string {
	b, _ := s.MarshalJSON()
	return string(b)
}

// Contains reports whether everything other allows, s allows: the same
// collection; other's ops and fields subsets of s's; and every rule of s
// matched in other by the same rule (or, for a list rule, one with a
// subset of its list), so that any record other allows for a principal,
// s allows for that principal.
func (s *Scope) Contains(o kindapi.Scope) bool {
	other, ok := o.(*Scope)
	if !ok || s == nil || other == nil || other.collection != s.collection {
		return false
	}
	for _, op := range other.ops {
		if !s.AllowsOp(op) {
			return false
		}
	}
	if other.allFields && !s.allFields {
		return false
	}
	for _, f := range other.fields {
		if !s.AllowsField(f) {
			return false
		}
	}
	for _, pr := range s.rules {
		if !slices.ContainsFunc(other.rules, func(r rule) bool { return r.within(pr) }) {
			return false
		}
	}
	return true
}

// grantSpec is a cap "data" block as JSON.
type grantSpec struct {
	Collection *string         `json:"collection"`
	Records    json.RawMessage `json:"records"`
	Fields     []string        `json:"fields"`
	Ops        []string        `json:"ops"`
}

// narrowReq is a cap_derive request; absent fields keep the parent's.
type narrowReq struct {
	Collection *string         `json:"collection"`
	Records    json.RawMessage `json:"records"`
	Fields     []string        `json:"fields"`
	Ops        []string        `json:"ops"`
}

type ruleJSON struct {
	Relation *string  `json:"relation"`
	Owners   []string `json:"owners"`
	IDs      []string `json:"ids"`
}

// parseRule parses a records value: "own", {"relation":R},
// {"owners":[...]} or {"ids":[...]}.
func parseRule(b json.RawMessage) (rule, error) {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		if s == ruleOwn {
			return rule{kind: ruleOwn}, nil
		}
		return rule{}, fmt.Errorf(`%q: want "own", {"relation":R}, {"owners":[...]} or {"ids":[...]}`, trunc(s))
	}
	var r ruleJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return rule{}, fmt.Errorf(`want "own", {"relation":R}, {"owners":[...]} or {"ids":[...]}: %v`, err)
	}
	n := 0
	if r.Relation != nil {
		n++
	}
	if r.Owners != nil {
		n++
	}
	if r.IDs != nil {
		n++
	}
	if n != 1 {
		return rule{}, errors.New(`set exactly one of "relation", "owners", "ids"`)
	}
	switch {
	case r.Relation != nil:
		if err := validName(*r.Relation, MaxNameLen); err != nil {
			return rule{}, fmt.Errorf("relation: %v", err)
		}
		return rule{kind: ruleRelation, relation: *r.Relation}, nil
	case r.Owners != nil:
		l, err := canonList(r.Owners, "owners", func(v string) error { return prefixErr("owners", validName(v, MaxNameLen)) })
		return rule{kind: ruleOwners, list: l}, err
	default:
		l, err := canonList(r.IDs, "ids", func(v string) error { return prefixErr("ids", validName(v, MaxNameLen)) })
		return rule{kind: ruleIDs, list: l}, err
	}
}

func canonList(items []string, noun string, check func(string) error) ([]string, error) {
	if len(items) == 0 {
		return nil, fmt.Errorf("%s must not be empty", noun)
	}
	if len(items) > MaxListLen {
		return nil, fmt.Errorf("%d %s (max %d)", len(items), noun, MaxListLen)
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		if err := check(it); err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// parseFields parses a fields list: ["*"] alone for every field, or field
// names.
func parseFields(fs []string) (all bool, fields []string, err error) {
	if slices.Contains(fs, "*") {
		if len(fs) != 1 {
			return false, nil, errors.New(`"*" must be alone`)
		}
		return true, nil, nil
	}
	l, err := canonList(fs, "fields", validFieldName)
	return false, l, err
}

func parseOps(ops []string) ([]string, error) {
	return canonList(ops, "ops", func(op string) error {
		if !slices.Contains(allOps, op) {
			return fmt.Errorf("unknown op %q (ops: %s)", trunc(op), strings.Join(allOps, ", "))
		}
		return nil
	})
}

func prefixErr(p string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %v", p, err)
	}
	return nil
}

func trunc(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// grant mints a root scope from a spec.
func grant(spec []byte) (*Scope, error) {
	var sp grantSpec
	if err := kindapi.DecodeSpec("data", spec, &sp); err != nil {
		return nil, err
	}
	fe := func(field, format string, args ...any) error {
		return &kindapi.FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if sp.Collection == nil {
		return nil, fe("collection", "required")
	}
	if err := validName(*sp.Collection, MaxNameLen); err != nil {
		return nil, fe("collection", "%v", err)
	}
	s := &Scope{collection: *sp.Collection, ops: []string{OpRead}}
	if len(sp.Records) == 0 || string(sp.Records) == "null" {
		return nil, fe("records", `required: "own", {"relation":R}, {"owners":[...]} or {"ids":[...]}`)
	}
	r, err := parseRule(sp.Records)
	if err != nil {
		return nil, fe("records", "%v", err)
	}
	s.rules = []rule{r}
	if sp.Fields == nil {
		return nil, fe("fields", `required: the fields of the slice, or ["*"] for every field`)
	}
	if s.allFields, s.fields, err = parseFields(sp.Fields); err != nil {
		return nil, fe("fields", "%v", err)
	}
	if sp.Ops != nil {
		if s.ops, err = parseOps(sp.Ops); err != nil {
			return nil, fe("ops", "%v", err)
		}
	}
	return s, nil
}

// narrow returns the scope req asks for within parent: EINVAL for a
// malformed request, EDENIED naming everything that would widen.
func narrow(parent *Scope, req []byte) (*Scope, error) {
	var r narrowReq
	if err := kindapi.DecodeNarrow("data", req, &r); err != nil {
		return nil, err
	}
	inval := func(field string, err error) error {
		return kindapi.Errorf(abi.EINVAL, "data: narrowing request: %s: %v", field, err)
	}
	child := &Scope{
		collection: parent.collection, rules: slices.Clone(parent.rules),
		fields: slices.Clone(parent.fields), allFields: parent.allFields, ops: slices.Clone(parent.ops),
	}
	var widen []string
	if r.Collection != nil && *r.Collection != parent.collection {
		widen = append(widen, fmt.Sprintf("collection %q is not %q", trunc(*r.Collection), parent.collection))
	}
	if r.Ops != nil {
		ops, err := parseOps(r.Ops)
		if err != nil {
			return nil, inval("ops", err)
		}
		var extra []string
		for _, op := range ops {
			if !parent.AllowsOp(op) {
				extra = append(extra, op)
			}
		}
		if extra != nil {
			widen = append(widen, fmt.Sprintf("ops %v not in %v", extra, parent.ops))
		}
		child.ops = ops
	}
	if r.Fields != nil {
		all, fields, err := parseFields(r.Fields)
		if err != nil {
			return nil, inval("fields", err)
		}
		switch {
		case all && !parent.allFields:
			widen = append(widen, fmt.Sprintf(`fields ["*"] not within %v`, parent.fields))
		case !all:
			var extra []string
			for _, f := range fields {
				if !parent.AllowsField(f) {
					extra = append(extra, f)
				}
			}
			if extra != nil {
				widen = append(widen, fmt.Sprintf("fields %v not in %v", extra, parent.Fields()))
			}
		}
		child.allFields, child.fields = all, fields
	}
	if len(r.Records) > 0 && string(r.Records) != "null" {
		nr, err := parseRule(r.Records)
		if err != nil {
			return nil, inval("records", err)
		}
		switch nr.kind {
		case ruleOwn, ruleRelation:
			// A principal rule can only be restated: anything else would
			// be a different set of records, not a subset.
			if !slices.ContainsFunc(parent.rules, nr.equal) {
				widen = append(widen, fmt.Sprintf("records %s is not a rule of the capability (%s); narrow to an owners or ids list instead", mustJSON(nr), mustJSON(parent.rules)))
			}
		default:
			// A list under a list of the same kind must be a subset of
			// it; under any other rule it is checked at use against the
			// whole chain.
			for _, pr := range parent.rules {
				if pr.kind == nr.kind && !nr.within(pr) {
					var extra []string
					for _, v := range nr.list {
						if _, ok := slices.BinarySearch(pr.list, v); !ok {
							extra = append(extra, v)
						}
					}
					widen = append(widen, fmt.Sprintf("records %s %v not in %v", nr.kind, extra, pr.list))
				}
			}
			if !slices.ContainsFunc(child.rules, nr.equal) {
				if len(child.rules) >= MaxRules {
					return nil, kindapi.Errorf(abi.ELIMIT, "data: narrowing request: more than %d record rules", MaxRules)
				}
				child.rules = append(child.rules, nr)
			}
		}
	}
	if widen != nil {
		return nil, kindapi.Errorf(abi.EDENIED, "data: narrowing would widen the capability: %s", strings.Join(widen, "; "))
	}
	return child, nil
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
