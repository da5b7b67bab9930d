package manifest

// Evaluation of expressions: var.NAME, strings, whole numbers, lists of
// strings, and how a value is described in a message.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// eval evaluates an expression, first checking that every variable it
// references is set, so the message names the missing variable.
func (p *parser) eval(expr hcl.Expression) (cty.Value, bool) {
	ok := true
	for _, tr := range expr.Variables() {
		root := tr.RootName()
		if root != "var" {
			p.add(diagErr(tr.SourceRange(), "unknown variable %q: the only variables are var.NAME", root))
			ok = false
			continue
		}
		if len(tr) < 2 {
			p.add(diagErr(tr.SourceRange(), "var must be followed by a variable name, as in var.origin"))
			ok = false
			continue
		}
		var name string
		switch s := tr[1].(type) {
		case hcl.TraverseAttr:
			name = s.Name
		case hcl.TraverseIndex:
			if s.Key.Type() == cty.String {
				name = s.Key.AsString()
			}
		}
		if name == "" {
			continue // let evaluation report it
		}
		if _, set := p.vars[name]; !set {
			p.add(diagErr(tr.SourceRange(), "variable %q is not set: pass --var %s=VALUE", name, name))
			ok = false
		}
	}
	if !ok {
		return cty.NilVal, false
	}
	v, diags := expr.Value(p.ctx)
	p.add(diags...)
	if diags.HasErrors() {
		return cty.NilVal, false
	}
	if !v.IsWhollyKnown() {
		p.add(diagErr(expr.Range(), "value is not known"))
		return cty.NilVal, false
	}
	return v, true
}

// str evaluates a string attribute.
func (p *parser) str(a *hcl.Attribute, nonEmpty bool) (string, bool) {
	v, ok := p.eval(a.Expr)
	if !ok {
		return "", false
	}
	if v.IsNull() || v.Type() != cty.String {
		p.add(diagErr(a.Expr.Range(), "%s must be a string, not %s", a.Name, typeName(v)))
		return "", false
	}
	s := v.AsString()
	if nonEmpty && strings.TrimSpace(s) == "" {
		p.add(diagErr(a.Expr.Range(), "%s must not be empty", a.Name))
		return "", false
	}
	return s, true
}

func typeName(v cty.Value) string {
	if v.IsNull() {
		return "null"
	}
	return v.Type().FriendlyName()
}

func describe(v cty.Value) string {
	if !v.IsNull() && v.Type() == cty.Number {
		return v.AsBigFloat().String()
	}
	if !v.IsNull() && v.Type() == cty.String {
		return fmt.Sprintf("%q", v.AsString())
	}
	return typeName(v)
}

func wholeNumber(v cty.Value) (int64, bool) {
	if v.IsNull() || v.Type() != cty.Number {
		return 0, false
	}
	bf := v.AsBigFloat()
	if !bf.IsInt() {
		return 0, false
	}
	n, acc := bf.Int64()
	if acc != 0 {
		return 0, false
	}
	return n, true
}

// stringOrList reads a string or a list of strings.
func stringOrList(v cty.Value) ([]string, error) {
	if v.IsNull() || !v.IsKnown() {
		return nil, errors.New("null")
	}
	if v.Type() == cty.String {
		return []string{v.AsString()}, nil
	}
	if !v.Type().IsListType() && !v.Type().IsTupleType() {
		return nil, errors.New("not a string or list")
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() || e.Type() != cty.String {
			return nil, errors.New("not a string")
		}
		out = append(out, e.AsString())
	}
	return out, nil
}
