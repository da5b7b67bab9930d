package manifest

// Seed blocks: the records a run imports into the data store first.

import (
	"os"
	"path/filepath"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Seed is a seed block: records the run imports into the data store
// before it starts (replacing records with the same ids), so an example
// carries its data with it:
//
//	seed "benefits" {
//	  file      = "data/benefits.json"          # .json or .csv, relative to the manifest
//	  relations = { manager = "manager_of" }    # optional: FIELD = RELATION edges to derive
//	}
type Seed struct {
	Collection string
	File       string // absolute
	Relations  map[string]string

	rng hcl.Range
}

// Error positions an error about this seed block.
func (s *Seed) Error(err error) error {
	return &Error{Diags: hcl.Diagnostics{diagErr(s.rng, "seed %q: %v", s.Collection, err)}}
}

func (p *parser) seed(b *hcl.Block) (Seed, bool) {
	s := Seed{Collection: b.Labels[0], rng: b.DefRange}
	if s.Collection == "" {
		p.add(diagErr(b.LabelRanges[0], "seed collection must not be empty"))
		return Seed{}, false
	}
	content, diags := bodyContent(b.Body, seedSchema)
	p.add(diags...)
	if diags.HasErrors() {
		return Seed{}, false
	}
	a := content.Attributes["file"]
	f, ok := p.str(a, true)
	if !ok {
		return Seed{}, false
	}
	if !filepath.IsAbs(f) {
		f = filepath.Join(p.dir, f)
	}
	if _, err := os.Stat(f); err != nil {
		p.add(diagErr(a.Expr.Range(), "seed file: %v", err))
		return Seed{}, false
	}
	s.File = f
	if a, ok := content.Attributes["relations"]; ok {
		v, vok := p.eval(a.Expr)
		if !vok {
			return Seed{}, false
		}
		if v.IsNull() || !(v.Type().IsObjectType() || v.Type().IsMapType()) {
			p.add(diagErr(a.Expr.Range(), "relations must be an object of FIELD = \"relation\""))
			return Seed{}, false
		}
		s.Relations = map[string]string{}
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			if e.IsNull() || e.Type() != cty.String || e.AsString() == "" {
				p.add(diagErr(a.Expr.Range(), "relation for field %s must be a non-empty string", k.AsString()))
				return Seed{}, false
			}
			s.Relations[k.AsString()] = e.AsString()
		}
	}
	return s, true
}
