package cli

// mandate check's grants: the cap blocks granted by the kinds themselves,
// as mandate run grants them but with no kernel, no secrets read and no
// spawn module built (checkGranter).

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/mandatevm/mandate/constraint"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/manifest"
	"github.com/mandatevm/mandate/sandbox"
)

// checkedGrants is what the kinds granted a manifest's cap blocks.
type checkedGrants struct {
	// Grants are the root grants, one per cap block, in the manifest's
	// order.
	Grants []kernel.GrantSpec
	// Kinds are the kinds, by name.
	Kinds map[string]kindapi.Kind
	// Declassifiers names the kinds that may lower labels.
	Declassifiers []string
	// Modules maps the placeholder digests spawn grants were given to
	// the modules the manifest names.
	Modules map[string]string
}

// checkGrants has the kinds check the cap blocks as mandate run does,
// without reading secrets or building spawn modules, and returns the
// scopes they grant.
func checkGrants(m *manifest.Manifest, ks []kindapi.Kind, declassifiers []string) (*checkedGrants, error) {
	g := newCheckGranter(ks)
	// A variable need not be set (a secret mandate check never uses);
	// one that is, such as the PATH an mcp grant's command is found in,
	// is read.
	lookup := func(name string) (string, bool) {
		if v, ok := os.LookupEnv(name); ok {
			return v, true
		}
		return "placeholder", true
	}
	gc := kindapi.GrantContext{Dir: m.Dir, LookupEnv: lookup}
	if m.Retry > 0 {
		gc.Seed = "mandate check" // as a fleet node grants it: keys derived from the run
	}
	grants, err := m.GrantsWith(g, gc)
	if err != nil {
		return nil, err
	}
	if len(grants) != len(m.Caps) {
		return nil, fmt.Errorf("%d grants for %d cap blocks", len(grants), len(m.Caps))
	}
	for i := range grants {
		if grants[i].Name != m.Caps[i].Name || grants[i].Kind != m.Caps[i].Kind {
			return nil, fmt.Errorf("grant %d is %s %q, not the cap block's %s %q", i, grants[i].Kind, grants[i].Name, m.Caps[i].Kind, m.Caps[i].Name)
		}
	}
	return &checkedGrants{Grants: grants, Kinds: g.kinds, Declassifiers: declassifiers, Modules: g.modules}, nil
}

// checkGranter is a manifest.Granter over the CLI's kinds that needs no
// kernel: it grants with the kinds themselves and compiles constraint
// expressions as the kernel does, with the CEL compiler mandate run uses.
type checkGranter struct {
	kinds   map[string]kindapi.Kind
	modules map[string]string // placeholder digest -> module as written
	cc      *constraint.Compiler
}

func newCheckGranter(ks []kindapi.Kind) *checkGranter {
	g := &checkGranter{kinds: map[string]kindapi.Kind{}, modules: map[string]string{}, cc: constraint.New()}
	for _, k := range ks {
		g.kinds[k.Name()] = k
	}
	return g
}

func (g *checkGranter) Kind(name string) (kindapi.Kind, bool) {
	k, ok := g.kinds[name]
	return k, ok
}

func (g *checkGranter) Kinds() []string {
	names := make([]string, 0, len(g.kinds))
	for n := range g.kinds {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (g *checkGranter) Grant(kind string, gc kindapi.GrantContext, spec []byte) (kindapi.Scope, error) {
	k := g.kinds[kind]
	if slices.Contains(k.Info().Ops, kindapi.OpSpawn) {
		var err error
		if spec, err = g.placeholderModules(gc, spec); err != nil {
			return nil, err
		}
	}
	return k.Grant(gc, spec)
}

// placeholderModules rewrites the module paths of a spawn grant's
// "modules" list to placeholder digests: mandate run resolves the paths
// to the digests of the modules it builds, mandate check builds nothing.
// It checks that the paths exist, and remembers what each placeholder
// stands for. Anything it cannot read it leaves to the kind to refuse.
func (g *checkGranter) placeholderModules(gc kindapi.GrantContext, spec []byte) ([]byte, error) {
	var sp struct {
		Modules []json.RawMessage `json:"modules"`
	}
	if json.Unmarshal(spec, &sp) != nil || sp.Modules == nil {
		return spec, nil
	}
	modules := sp.Modules
	for i, raw := range modules {
		var name string
		if json.Unmarshal(raw, &name) != nil || name == "" || sandbox.IsDigest(strings.ToLower(name)) {
			continue
		}
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(gc.Dir, p)
		}
		if _, err := os.Stat(p); err != nil {
			return nil, &kindapi.FieldError{Field: "modules", Msg: fmt.Sprintf("module %s: %v", name, err)}
		}
		digest := fmt.Sprintf("sha256:%064x", len(g.modules)+1)
		g.modules[digest] = name
		modules[i], _ = json.Marshal(digest)
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(spec, &fields) != nil {
		return spec, nil
	}
	b, err := json.Marshal(modules)
	if err != nil {
		return spec, nil
	}
	fields["modules"] = b
	if b, err = json.Marshal(fields); err != nil {
		return spec, nil
	}
	return b, nil
}

// CompileConstraints compiles when and approve_when over the kind's
// variables (kernel.ConstraintVars) as Kernel.CompileConstraints does, so
// an expression mandate run would refuse is a manifest error here too.
func (g *checkGranter) CompileConstraints(kind string, when, approveWhen []string) (kernel.Constraints, error) {
	var cs kernel.Constraints
	k, ok := g.kinds[kind]
	if !ok {
		return cs, fmt.Errorf("unknown capability kind %q", kind)
	}
	vars := kernel.ConstraintVars(k)
	for _, src := range when {
		c, err := g.cc.Compile(src, vars)
		if err != nil {
			return kernel.Constraints{}, fmt.Errorf("when %q: %w", src, err)
		}
		cs.When = append(cs.When, c)
	}
	for _, src := range approveWhen {
		c, err := g.cc.Compile(src, vars)
		if err != nil {
			return kernel.Constraints{}, fmt.Errorf("approve_when %q: %w", src, err)
		}
		cs.ApproveWhen = append(cs.ApproveWhen, c)
	}
	return cs, nil
}

// ParseBudget reads a budget in the kind's unit, as the kernel does.
func (g *checkGranter) ParseBudget(kind string, s kindapi.Scope, text string) (int64, error) {
	k, ok := g.kinds[kind]
	if !ok {
		return 0, fmt.Errorf("unknown capability kind %q", kind)
	}
	return kindapi.ParseBudget(k, s, text)
}
