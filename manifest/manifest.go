package manifest

// Manifests, and how one is loaded: Manifest, Load and Parse, the parser
// that collects every problem of a file, and the task block (the root
// task's attributes, its result and retry).

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/gocty"
)

// MaxSize bounds a manifest file.
const MaxSize = 1 << 20

// Manifest is a loaded, validated manifest. Its fields are set by Load and
// must not be modified.
type Manifest struct {
	// Path is the manifest's file name as given to Load; Dir is its
	// directory, absolute.
	Path string
	Dir  string
	// Name is the task block's label.
	Name string
	// ModulePath is the module attribute resolved against Dir, with
	// symbolic links resolved: a .wasm file or a guest directory
	// (ModuleIsDir).
	ModulePath  string
	ModuleIsDir bool
	// Digest is the pinned "sha256:<hex>" digest, "" when not pinned.
	Digest    string
	Principal string
	// Entry is the reactor entry, "" for the default.
	Entry string
	// Caps are the cap blocks, in file order.
	Caps []Cap
	// Seeds are the records the run imports into the data store first.
	Seeds []Seed
	// Clearance bounds what the task may ever hold; nil: unbounded.
	Clearance *kindapi.Label
	// RefuseTaintedResult is result { accepts_untrusted = false }: the
	// task may not set a result carrying any integrity taint.
	RefuseTaintedResult bool
	// RefusedResultTaints is result { refuses_taints = [...] }: the task
	// may not set a result carrying a taint they match (a taint, or a
	// prefix ending in "*"); the refusal names the taint.
	RefusedResultTaints kindapi.TaintPatterns
	// Retry is how many times a fleet may run the task again when the
	// node running it is lost (retry = N, 1..MaxRetry); 0: never, the run
	// is marked lost. Only a task whose every capability is repeatable
	// (kindapi.Description.Repeatable: safe methods, reads, charges with
	// keys derived from the run) may set it; the host checks that when the
	// run starts.
	Retry int

	limits      kernel.Limits
	moduleRange hcl.Range
	digestRange hcl.Range
}

// Limits returns the task's limits; zero fields take the kernel's defaults.
func (m *Manifest) Limits() kernel.Limits { return m.limits }

// Load reads, parses and validates the manifest at path. vars are the
// values of var.NAME. It needs no kernel: the cap blocks' specs are checked
// by their kinds in Grants. A failure is an *Error (or an I/O error).
func Load(path string, vars map[string]string) (*Manifest, error) {
	src, dir, err := readFile(path, "manifest")
	if err != nil {
		return nil, err
	}
	return Parse(src, path, dir, vars)
}

// readFile reads a manifest or policy (what) of at most MaxSize bytes and
// returns it with its directory, absolute.
func readFile(path, what string) ([]byte, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, "", err
	}
	if len(src) > MaxSize {
		return nil, "", fmt.Errorf("%s: %s larger than %d bytes", path, what, MaxSize)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, "", err
	}
	return src, dir, nil
}

// Parse is Load on a manifest already in memory: filename is used in
// positions, dir is where relative module paths resolve.
func Parse(src []byte, filename, dir string, vars map[string]string) (*Manifest, error) {
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, &Error{Diags: diags}
	}
	p := newParser(dir, vars)
	m := &Manifest{Path: filename, Dir: dir}
	p.root(file, m)
	if p.diags.HasErrors() {
		return nil, &Error{Diags: p.diags, Policy: p.isPolicy}
	}
	return m, nil
}

// parser evaluates the blocks of one file, collecting every problem.
type parser struct {
	dir   string // where relative paths resolve
	vars  map[string]string
	ctx   *hcl.EvalContext
	diags hcl.Diagnostics
	// isPolicy: the file turned out to be a policy (root).
	isPolicy bool
}

func newParser(dir string, vars map[string]string) *parser {
	p := &parser{dir: dir, vars: vars}
	p.ctx = &hcl.EvalContext{Variables: map[string]cty.Value{"var": p.varsObject()}}
	return p
}

func (p *parser) add(d ...*hcl.Diagnostic) { p.diags = append(p.diags, d...) }

func (p *parser) varsObject() cty.Value {
	if len(p.vars) == 0 {
		return cty.EmptyObjectVal
	}
	m := make(map[string]cty.Value, len(p.vars))
	for k, v := range p.vars {
		m[k] = cty.StringVal(v)
	}
	return cty.ObjectVal(m)
}

func (p *parser) root(file *hcl.File, m *Manifest) {
	if rng, ok := policyBlock(file); ok {
		p.isPolicy = true
		p.add(diagErr(rng, "this is a policy (session and tool blocks), not a task manifest: use mandate mcp serve"))
		return
	}
	content, diags := bodyContent(file.Body, rootSchema)
	p.add(diags...)
	var tasks []*hcl.Block
	for _, b := range content.Blocks {
		if b.Type == "task" {
			tasks = append(tasks, b)
		}
	}
	switch {
	case len(tasks) == 0:
		if !diags.HasErrors() {
			rng := file.Body.MissingItemRange()
			p.add(diagErr(rng, `no task block: a manifest describes one root task, task "NAME" { ... }`))
		}
		return
	case len(tasks) > 1:
		p.add(diagErr(tasks[1].DefRange, "only one task block is allowed; the first is at %s", posString(tasks[0].DefRange)))
		return
	}
	p.task(tasks[0], m)
}

// policyBlock returns the first session or tool block of a file that has
// no task block: a policy given where a task manifest belongs.
func policyBlock(file *hcl.File) (hcl.Range, bool) {
	body, ok := file.Body.(*hclsyntax.Body)
	if !ok {
		return hcl.Range{}, false
	}
	var first *hclsyntax.Block
	for _, b := range body.Blocks {
		switch b.Type {
		case "task":
			return hcl.Range{}, false
		case "session", "tool":
			if first == nil {
				first = b
			}
		}
	}
	if first == nil {
		return hcl.Range{}, false
	}
	return first.DefRange(), true
}

func (p *parser) task(b *hcl.Block, m *Manifest) {
	m.Name = b.Labels[0]
	if m.Name == "" {
		p.add(diagErr(b.LabelRanges[0], "task name must not be empty"))
	}
	content, diags := bodyContent(b.Body, taskSchema)
	p.add(diags...)

	u := p.unit(content)
	m.Principal = u.principal
	m.ModulePath, m.ModuleIsDir, m.moduleRange = u.modulePath, u.moduleIsDir, u.moduleRange
	m.Digest, m.digestRange = u.digest, u.digestRange
	m.Entry = u.entry
	m.Clearance = u.clearance
	m.Caps = u.caps
	m.Seeds = u.seeds
	m.limits = u.limits
	var result *hcl.Block
	for _, blk := range content.Blocks {
		if blk.Type != "result" {
			continue
		}
		if result != nil {
			p.add(diagErr(blk.DefRange, "only one result block is allowed; the first is at %s", posString(result.DefRange)))
			continue
		}
		result = blk
		m.RefuseTaintedResult, m.RefusedResultTaints = p.result(blk)
	}
	if a, ok := content.Attributes["retry"]; ok {
		if v, vok := p.eval(a.Expr); vok {
			var n64 int64
			if v.IsNull() || v.Type() != cty.Number || gocty.FromCtyValue(v, &n64) != nil || n64 < 1 || n64 > MaxRetry {
				p.add(diagErr(a.Expr.Range(), "retry must be a whole number from 1 to %d, not %s", MaxRetry, describe(v)))
			} else {
				m.Retry = int(n64)
			}
		}
	}
}

// MaxRetry bounds a task's retry attribute.
const MaxRetry = 5

// result parses a result block: whether the task's result must carry no
// integrity taint (accepts_untrusted = false), and the taints it refuses
// when it accepts others (refuses_taints).
func (p *parser) result(b *hcl.Block) (refuseTainted bool, refused kindapi.TaintPatterns) {
	if len(b.Labels) != 0 {
		p.add(diagErr(b.DefRange, "result takes no labels"))
	}
	content, diags := bodyContent(b.Body, resultSchema)
	p.add(diags...)
	if a, ok := content.Attributes["accepts_untrusted"]; ok {
		if v, ok := p.eval(a.Expr); ok {
			if v.IsNull() || v.Type() != cty.Bool {
				p.add(diagErr(a.Expr.Range(), "accepts_untrusted must be true or false"))
			} else {
				refuseTainted = v.False()
			}
		}
	}
	if a, ok := content.Attributes["refuses_taints"]; ok {
		if v, ok := p.eval(a.Expr); ok {
			ps, err := stringOrList(v)
			if err != nil && !(v.Type().IsTupleType() && v.LengthInt() == 0) {
				p.add(diagErr(a.Expr.Range(), `refuses_taints must be a list of taints or prefixes ending in "*", e.g. ["web:*", "reviews:hotels"]`))
			} else if refused, err = kindapi.ParseTaintPatterns(ps); err != nil {
				p.add(diagErr(a.Expr.Range(), "refuses_taints: %v", err))
			}
		}
	}
	return refuseTainted, refused
}
