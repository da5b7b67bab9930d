package manifest

// Cap blocks: Cap, and how one is evaluated: the kernel's attributes
// (audit, rate, max_uses, budget, when, approve_when, approve_mints,
// approve_plans) and the rest, the kind's grant spec, as JSON.

import (
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/gocty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// Cap is one cap block, evaluated.
type Cap struct {
	Kind string
	Name string
	// Audit is the kernel-level audit attribute.
	Audit bool
	// Rate is the kernel-level rate attribute; zero when unset.
	Rate kernel.Rate
	// MaxUses is the kernel-level max_uses attribute; 0 when unset.
	MaxUses int64
	// ApproveMints is the kernel-level approve_mints attribute: a call a
	// person approved is approved for the rest of the task.
	ApproveMints bool
	// ApprovePlans is the kernel-level approve_plans attribute: calls on
	// the capability may be items of a plan a person approves once.
	ApprovePlans bool
	// Budget is the kernel-level budget attribute as written, read in the
	// kind's unit by Grants; "" when unset.
	Budget string
	// When and ApproveWhen are the kernel-level constraint expressions.
	When, ApproveWhen []string
	// Spec is the block's other attributes as a JSON object: the kind's
	// grant spec.
	Spec []byte

	rng       hcl.Range            // the block's header
	kindRange hcl.Range            // the kind label
	attrs     map[string]hcl.Range // attribute name -> its value's range
}

func (p *parser) cap(b *hcl.Block) (Cap, bool) {
	c := Cap{
		Kind:      b.Labels[0],
		Name:      b.Labels[1],
		rng:       b.DefRange,
		kindRange: b.LabelRanges[0],
		attrs:     make(map[string]hcl.Range),
	}
	ok := true
	if c.Kind == "" {
		p.add(diagErr(b.LabelRanges[0], "capability kind must not be empty"))
		ok = false
	}
	if c.Name == "" || len(c.Name) > abi.MaxNameLen {
		p.add(diagErr(b.LabelRanges[1], "capability name must be 1 to %d bytes", abi.MaxNameLen))
		ok = false
	}
	attrs, diags := b.Body.JustAttributes()
	p.add(diags...)
	if diags.HasErrors() {
		ok = false
	}
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { // file order
		return attrs[names[i]].Range.Start.Byte < attrs[names[j]].Range.Start.Byte
	})
	spec := make(map[string]cty.Value)
	for _, n := range names {
		a := attrs[n]
		c.attrs[n] = a.Expr.Range()
		switch {
		case reservedAttrs[n]:
			p.add(diagErr(a.NameRange, "%s is reserved for the kernel and not supported yet", n))
			ok = false
			continue
		case n == "audit":
			v, vok := p.eval(a.Expr)
			if !vok {
				ok = false
				continue
			}
			if v.IsNull() || v.Type() != cty.Bool {
				p.add(diagErr(a.Expr.Range(), "audit must be true or false, not %s", describe(v)))
				ok = false
				continue
			}
			c.Audit = v.True()
			continue
		case n == "approve_mints":
			v, vok := p.eval(a.Expr)
			if !vok {
				ok = false
				continue
			}
			if v.IsNull() || v.Type() != cty.Bool {
				p.add(diagErr(a.Expr.Range(), "approve_mints must be true or false, not %s", describe(v)))
				ok = false
				continue
			}
			c.ApproveMints = v.True()
			continue
		case n == "approve_plans":
			v, vok := p.eval(a.Expr)
			if !vok {
				ok = false
				continue
			}
			if v.IsNull() || v.Type() != cty.Bool {
				p.add(diagErr(a.Expr.Range(), "approve_plans must be true or false, not %s", describe(v)))
				ok = false
				continue
			}
			c.ApprovePlans = v.True()
			continue
		case n == "rate":
			s, sok := p.str(a, true)
			if !sok {
				ok = false
				continue
			}
			r, err := kernel.ParseRate(s)
			if err != nil {
				p.add(diagErr(a.Expr.Range(), "%v", err))
				ok = false
				continue
			}
			c.Rate = r
			continue
		case n == "max_uses":
			v, vok := p.eval(a.Expr)
			if !vok {
				ok = false
				continue
			}
			var n64 int64
			if v.IsNull() || v.Type() != cty.Number || gocty.FromCtyValue(v, &n64) != nil || n64 < 1 {
				p.add(diagErr(a.Expr.Range(), "max_uses must be a whole number of at least 1, not %s", describe(v)))
				ok = false
				continue
			}
			c.MaxUses = n64
			continue
		case n == "budget":
			v, vok := p.eval(a.Expr)
			if !vok {
				ok = false
				continue
			}
			switch {
			case !v.IsNull() && v.Type() == cty.String && strings.TrimSpace(v.AsString()) != "":
				c.Budget = v.AsString()
			case !v.IsNull() && v.Type() == cty.Number:
				c.Budget = v.AsBigFloat().Text('f', -1)
			default:
				p.add(diagErr(a.Expr.Range(), "budget must be an amount such as \"1000.00\", not %s", describe(v)))
				ok = false
				continue
			}
			continue
		case n == "when" || n == "approve_when":
			v, vok := p.eval(a.Expr)
			if !vok {
				ok = false
				continue
			}
			exprs, err := stringOrList(v)
			if err != nil {
				p.add(diagErr(a.Expr.Range(), "%s must be a CEL expression or a list of them, not %s", n, describe(v)))
				ok = false
				continue
			}
			if n == "when" {
				c.When = exprs
			} else {
				c.ApproveWhen = exprs
			}
			continue
		}
		v, vok := p.eval(a.Expr)
		if !vok {
			ok = false
			continue
		}
		if v.IsNull() {
			continue
		}
		spec[n] = v
	}
	if !ok {
		return Cap{}, false
	}
	js, err := ctyjson.SimpleJSONValue{Value: cty.ObjectVal(spec)}.MarshalJSON()
	if len(spec) == 0 {
		js, err = []byte("{}"), nil
	}
	if err != nil {
		p.add(diagErr(b.DefRange, "cap %q %q: cannot encode as JSON: %v", c.Kind, c.Name, err))
		return Cap{}, false
	}
	c.Spec = js
	return c, true
}
