package manifest

// Grants: minting the root scopes of cap blocks with a kernel's kinds,
// and positioning a kind's refusal at the attribute it names.

import (
	"errors"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Granter mints root scopes. *kernel.Kernel implements it.
type Granter interface {
	Kind(name string) (kindapi.Kind, bool)
	Kinds() []string
	Grant(kind string, g kindapi.GrantContext, spec []byte) (kindapi.Scope, error)
	CompileConstraints(kind string, when, approveWhen []string) (kernel.Constraints, error)
	ParseBudget(kind string, s kindapi.Scope, text string) (int64, error)
}

var _ Granter = (*kernel.Kernel)(nil)

// Grants mints the root scopes of the manifest's cap blocks with k's
// kinds. Every refusal is reported with its position: an unknown kind at
// the kind label, a kind's *kindapi.FieldError at that attribute's value,
// any other error at the cap block. Secrets named by a grant (header env
// variables, files) are read from the host environment and relative to the
// manifest's directory.
func (m *Manifest) Grants(k Granter) ([]kernel.GrantSpec, error) {
	return m.GrantsWith(k, kindapi.GrantContext{Dir: m.Dir})
}

// GrantsWith is Grants with a given grant context (tests use it to supply
// the environment).
func (m *Manifest) GrantsWith(k Granter, g kindapi.GrantContext) ([]kernel.GrantSpec, error) {
	return grantsWith(m.Caps, m.Dir, k, g)
}

// GrantCaps mints the root scopes of some of a file's cap blocks (those
// of one kind, say), as Manifest.GrantsWith mints them all: caps are cap
// blocks of a manifest or policy in dir.
func GrantCaps(caps []Cap, dir string, k Granter, g kindapi.GrantContext) ([]kernel.GrantSpec, error) {
	return grantsWith(caps, dir, k, g)
}

// grantsWith mints the root scopes of caps, cap blocks of a file in dir
// (g.Dir when it is set): the code behind Manifest.GrantsWith and
// Tool.GrantsWith.
func grantsWith(caps []Cap, dir string, k Granter, g kindapi.GrantContext) ([]kernel.GrantSpec, error) {
	if g.Dir == "" {
		g.Dir = dir
	}
	var diags hcl.Diagnostics
	grants := make([]kernel.GrantSpec, 0, len(caps))
	for _, c := range caps {
		if _, ok := k.Kind(c.Kind); !ok {
			diags = append(diags, diagErr(c.kindRange, "unknown capability kind %q (known: %s)", c.Kind, strings.Join(k.Kinds(), ", ")))
			continue
		}
		gc := g
		gc.Name = c.Name
		scope, err := k.Grant(c.Kind, gc, c.Spec)
		if err == nil && scope == nil {
			err = errors.New("the kind returned no scope")
		}
		if err != nil {
			diags = append(diags, c.grantDiag(err))
			continue
		}
		var cons kernel.Constraints
		if len(c.When) > 0 || len(c.ApproveWhen) > 0 {
			w, err := k.CompileConstraints(c.Kind, c.When, nil)
			if err != nil {
				diags = append(diags, diagErr(c.attrs["when"], "cap %q %q: %v", c.Kind, c.Name, err))
				continue
			}
			a, err := k.CompileConstraints(c.Kind, nil, c.ApproveWhen)
			if err != nil {
				diags = append(diags, diagErr(c.attrs["approve_when"], "cap %q %q: %v", c.Kind, c.Name, err))
				continue
			}
			cons = kernel.Constraints{When: w.When, ApproveWhen: a.ApproveWhen}
		}
		allow := kernel.Allowance{MaxUses: c.MaxUses}
		if c.Budget != "" {
			b, err := k.ParseBudget(c.Kind, scope, c.Budget)
			if err != nil {
				diags = append(diags, diagErr(c.attrs["budget"], "cap %q %q: budget: %v", c.Kind, c.Name, err))
				continue
			}
			allow.Budget = b
		}
		grants = append(grants, kernel.GrantSpec{Name: c.Name, Kind: c.Kind, Scope: scope, Audit: c.Audit, Constraints: cons, Rate: c.Rate, Allowance: allow,
			ApproveMints: c.ApproveMints, ApprovePlans: c.ApprovePlans})
	}
	if diags.HasErrors() {
		return nil, &Error{Diags: diags}
	}
	return grants, nil
}

func (c *Cap) grantDiag(err error) *hcl.Diagnostic {
	var fe *kindapi.FieldError
	if errors.As(err, &fe) {
		if rng, ok := c.attrs[topField(fe.Field)]; ok {
			return diagErr(rng, "cap %q %q: %s", c.Kind, c.Name, fe.Error())
		}
	}
	return diagErr(c.rng, "cap %q %q: %v", c.Kind, c.Name, err)
}

// topField is the attribute a FieldError's field belongs to:
// "headers[0].env" and "headers.0.env" belong to "headers".
func topField(f string) string {
	if i := strings.IndexAny(f, ".["); i >= 0 {
		return f[:i]
	}
	return f
}

// Error positions an error about this cap block: a *kindapi.FieldError at
// that attribute's value, anything else at the block.
func (c *Cap) Error(err error) error {
	return &Error{Diags: hcl.Diagnostics{c.grantDiag(err)}}
}
