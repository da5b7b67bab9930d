// Package declassify is the declassify capability kind, Kind("declassify"):
// the only way a label goes down. A declassify capability lowers the label
// of a blob by a rule declared in the manifest: drop these confidentiality
// tags, optionally after projecting a JSON document onto these fields. The
// kernel audits every use, whatever the manifest says, and the task's own
// label never goes down: a task that read the passport stays tainted; what
// it can do is hand a declassified blob it never read to where it may go.
//
//	cap "declassify" "nationality" {
//	  drop    = ["pii:alice"]                 # tags it may remove
//	  project = ["fields.nationality"]        # keep only these (dotted) paths of a JSON object
//	}
//
// Operation "declassify", arguments {"blob": HANDLE}: returns a new blob,
// the projection of the blob (when project is set; the blob must then be a
// JSON object, else EINVAL) labelled with the blob's label minus the drop
// tags, plus the integrity taint "declassified:<tag>,..." naming what was
// dropped. Narrowing: fewer drop tags; a project list that is a subset of
// the parent's (or a first one where the parent had none). Wider is
// EDENIED, malformed EINVAL.
package declassify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Op is the kind's only operation.
const Op = "declassify"

// Kind is the declassify kind.
type Kind struct{}

var _ kindapi.Kind = (*Kind)(nil)

// New returns the kind. Its results lower labels only in a kernel that
// grants it the privilege at registration:
//
//	kindapi.Config{Kinds: []kindapi.Kind{declassify.New()}, Declassifiers: []string{declassify.KindName}}
//
// Registered without it, its results carry the caller's label like any
// other kind's (it fails safe).
func New() *Kind { return &Kind{} }

// KindName is the name the kind registers under.
const KindName = "declassify"

// Name implements kindapi.Kind.
func (*Kind) Name() string { return KindName }

// Info implements kindapi.Kind.
func (*Kind) Info() kindapi.Info { return kindapi.Info{Ops: []string{Op}} }

// Describe implements kindapi.Kind.
func (*Kind) Describe(sc kindapi.Scope) kindapi.Description {
	s, err := kindapi.ScopeAs[*Scope](sc, KindName)
	if err != nil {
		return kindapi.Description{}
	}
	// A declassification is a computation on a blob: it has no effect.
	d := kindapi.Description{Fields: []kindapi.Detail{{Name: "drop", Value: strings.Join(s.drop, ", ")}}, Repeatable: true}
	if s.project != nil {
		d.Fields = append(d.Fields, kindapi.Detail{Name: "project", Value: strings.Join(s.project, ", ")})
	}
	return d
}

// Scope is what a declassify capability may remove. Immutable.
type Scope struct {
	drop    []string // sorted
	project []string // sorted dotted paths; nil: the whole blob
}

type spec struct {
	Drop    []string `json:"drop"`
	Project []string `json:"project"`
}

// MarshalJSON implements kindapi.Scope.
func (s *Scope) MarshalJSON() ([]byte, error) {
	p := s.project
	if p == nil {
		p = []string{}
	}
	return json.Marshal(spec{Drop: s.drop, Project: p})
}

// Contains implements kindapi.Scope.
func (s *Scope) Contains(o kindapi.Scope) bool {
	t, ok := o.(*Scope)
	if !ok {
		return false
	}
	for _, d := range t.drop {
		if !slices.Contains(s.drop, d) {
			return false
		}
	}
	if s.project == nil {
		return true
	}
	if t.project == nil {
		return false
	}
	for _, p := range t.project {
		if !slices.Contains(s.project, p) {
			return false
		}
	}
	return true
}

func canon(xs []string, what string) ([]string, error) {
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		x = strings.TrimSpace(x)
		if x == "" || len(x) > 256 {
			return nil, fmt.Errorf("%s entry %q is empty or too long", what, x)
		}
		out = append(out, x)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Grant implements kindapi.Kind.
func (*Kind) Grant(_ kindapi.GrantContext, b []byte) (kindapi.Scope, error) {
	var sp spec
	if err := kindapi.DecodeSpec("declassify", b, &sp); err != nil {
		return nil, err
	}
	if len(sp.Drop) == 0 {
		return nil, &kindapi.FieldError{Field: "drop", Msg: "name the tags this capability may remove"}
	}
	d, err := canon(sp.Drop, "drop")
	if err != nil {
		return nil, &kindapi.FieldError{Field: "drop", Msg: err.Error()}
	}
	s := &Scope{drop: d}
	if sp.Project != nil {
		if s.project, err = canon(sp.Project, "project"); err != nil || len(s.project) == 0 {
			return nil, &kindapi.FieldError{Field: "project", Msg: "must list at least one dotted path"}
		}
	}
	return s, nil
}

// Narrow implements kindapi.Kind.
func (*Kind) Narrow(parent kindapi.Scope, b []byte) (kindapi.Scope, error) {
	p, err := kindapi.ScopeAs[*Scope](parent, "declassify")
	if err != nil {
		return nil, err
	}
	var sp spec
	if err := abi.DecodeJSON(b, &sp); err != nil {
		return nil, kindapi.Errorf(abi.EINVAL, "declassify: narrow: %v", err)
	}
	c := &Scope{drop: p.drop, project: p.project}
	if sp.Drop != nil {
		d, err := canon(sp.Drop, "drop")
		if err != nil {
			return nil, kindapi.Errorf(abi.EINVAL, "declassify: narrow: %v", err)
		}
		c.drop = d
	}
	if sp.Project != nil {
		pr, err := canon(sp.Project, "project")
		if err != nil || len(pr) == 0 {
			return nil, kindapi.Errorf(abi.EINVAL, "declassify: narrow: project must list at least one path")
		}
		c.project = pr
	}
	if !p.Contains(c) {
		return nil, kindapi.Errorf(abi.EDENIED, "declassify: narrowing would widen the capability (drop %v project %v within drop %v project %v)", c.drop, c.project, p.drop, p.project)
	}
	return c, nil
}

// Prepare implements kindapi.Kind: it resolves the blob, projects it and
// computes the lowered label; the effect returns them.
func (*Kind) Prepare(call *kindapi.Call) (kindapi.Op, error) {
	s, err := kindapi.ScopeAs[*Scope](call.Scope, KindName)
	if err != nil {
		return kindapi.Op{}, err
	}
	if call.Op != Op {
		return kindapi.Op{}, kindapi.Errorf(abi.ENOTSUP, "declassify: no operation %q", call.Op)
	}
	var a struct {
		Blob abi.Handle `json:"blob"`
	}
	if err := abi.DecodeJSON(call.Args, &a); err != nil {
		return kindapi.Op{}, kindapi.Errorf(abi.EINVAL, "declassify: %v", err)
	}
	b, err := call.Blob(a.Blob)
	if err != nil {
		return kindapi.Op{}, err
	}
	data := b.Bytes()
	if s.project != nil {
		if data, err = project(data, s.project); err != nil {
			return kindapi.Op{}, kindapi.Errorf(abi.EINVAL, "declassify: %v", err)
		}
	}
	var keep, dropped []string
	for _, tag := range b.Label().Conf() {
		if slices.Contains(s.drop, tag) {
			dropped = append(dropped, tag)
		} else {
			keep = append(keep, tag)
		}
	}
	integ := b.Label().Integ()
	if len(dropped) > 0 {
		integ = append(integ, "declassified:"+strings.Join(dropped, ","))
	}
	res := &kindapi.Result{Data: data, Label: kindapi.NewLabel(keep, integ)}
	return kindapi.Op{
		Show: func() kindapi.Preview {
			return kindapi.Preview{Summary: fmt.Sprintf("declassify a %d-byte blob labelled %s", b.Len(), b.Label()),
				Details: []kindapi.Detail{{Name: "drop", Value: strings.Join(dropped, ", ")},
					{Name: "blob", Value: fmt.Sprintf("%d bytes, sha256:%x", len(data), sha256.Sum256(data))}}}
		},
		Effect: func(context.Context) (*kindapi.Result, error) { return res, nil },
	}, nil
}

// project keeps only the dotted paths of a JSON object.
func project(data []byte, paths []string) ([]byte, error) {
	// Strict: a duplicated key or invalid UTF-8 would make the projection
	// one reading of a document a reader could take another way; numbers
	// keep their exact text.
	if err := abi.CheckJSON(data); err != nil {
		return nil, fmt.Errorf("blob is not a JSON object: %v", err)
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil || doc == nil {
		return nil, fmt.Errorf("blob is not a JSON object: %v", err)
	}
	out := map[string]any{}
	for _, p := range paths {
		parts := strings.Split(p, ".")
		var cur any = doc
		ok := true
		for _, k := range parts {
			m, isMap := cur.(map[string]any)
			if !isMap {
				ok = false
				break
			}
			if cur, ok = m[k]; !ok {
				break
			}
		}
		if !ok {
			continue
		}
		dst := out
		for _, k := range parts[:len(parts)-1] {
			next, _ := dst[k].(map[string]any)
			if next == nil {
				next = map[string]any{}
				dst[k] = next
			}
			dst = next
		}
		dst[parts[len(parts)-1]] = cur
	}
	return json.Marshal(out)
}
