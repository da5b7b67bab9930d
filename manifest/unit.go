package manifest

// What task, session and tool blocks share (unit): the module and its
// digest pin, the principal, the entry, the clearance, and the limits,
// cap and seed blocks; errors about the module, at its attribute.

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox"
)

// unit is what task, session and tool blocks share: the module a task
// runs, on whose behalf, its limits, its capabilities and the data it is
// seeded with. Each block's schema says which of these it may hold.
type unit struct {
	modulePath  string
	moduleIsDir bool
	moduleRange hcl.Range
	digest      string
	digestRange hcl.Range
	principal   string
	entry       string
	clearance   *kindapi.Label
	caps        []Cap
	seeds       []Seed
	limits      kernel.Limits
}

// unit parses the attributes module, digest, principal, entry and
// clearance and the blocks limits, cap and seed of a block's content
// (those its schema allows): a cap block is validated the same wherever
// it appears.
func (p *parser) unit(content *hcl.BodyContent) unit {
	var u unit
	if a, ok := content.Attributes["module"]; ok {
		if s, ok := p.str(a, true); ok {
			p.module(a, s, &u)
		}
	}
	if a, ok := content.Attributes["digest"]; ok {
		if s, ok := p.str(a, false); ok {
			if !sandbox.IsDigest(s) {
				p.add(diagErr(a.Expr.Range(), `digest %q is not of the form "sha256:" followed by 64 lower-case hex digits`, s))
			} else {
				u.digest = s
				u.digestRange = a.Expr.Range()
			}
		}
	}
	if a, ok := content.Attributes["principal"]; ok {
		if s, ok := p.str(a, true); ok {
			u.principal = s
		}
	}
	if a, ok := content.Attributes["entry"]; ok {
		if s, ok := p.str(a, true); ok {
			u.entry = s
		}
	}
	if a, ok := content.Attributes["clearance"]; ok {
		if v, ok := p.eval(a.Expr); ok {
			tags, err := stringOrList(v)
			if err != nil && !(v.Type().IsTupleType() && v.LengthInt() == 0) {
				p.add(diagErr(a.Expr.Range(), "clearance must be a list of confidentiality tags, e.g. [\"pii:alice\"]"))
			} else {
				l := kindapi.NewLabel(tags, nil)
				u.clearance = &l
			}
		}
	}

	seen := make(map[string]hcl.Range)
	var limits *hcl.Block
	for _, blk := range content.Blocks {
		switch blk.Type {
		case "limits":
			if limits != nil {
				p.add(diagErr(blk.DefRange, "only one limits block is allowed; the first is at %s", posString(limits.DefRange)))
				continue
			}
			limits = blk
			p.limits(blk, &u.limits)
		case "cap":
			name := blk.Labels[1]
			if first, dup := seen[name]; dup {
				p.add(diagErr(blk.LabelRanges[1], "duplicate capability name %q; the first is at %s", name, posString(first)))
				continue
			}
			seen[name] = blk.LabelRanges[1]
			if c, ok := p.cap(blk); ok {
				u.caps = append(u.caps, c)
			}
		case "seed":
			if s, ok := p.seed(blk); ok {
				u.seeds = append(u.seeds, s)
			}
		}
	}
	return u
}

func (p *parser) module(a *hcl.Attribute, s string, u *unit) {
	path := s
	if !filepath.IsAbs(path) {
		path = filepath.Join(p.dir, path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		msg := err.Error()
		if errors.Is(err, os.ErrNotExist) {
			msg = "no such file or directory"
		}
		p.add(diagErr(a.Expr.Range(), "module %q: %s", s, msg))
		return
	}
	switch {
	case fi.IsDir():
		u.moduleIsDir = true
	case !fi.Mode().IsRegular():
		p.add(diagErr(a.Expr.Range(), "module %q is neither a .wasm file nor a guest directory", s))
		return
	}
	// A guest directory is built where it really is, inside its module.
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	u.modulePath = path
	u.moduleRange = a.Expr.Range()
}

// CheckDigest reports whether digest (as sandbox.Digest computes it)
// matches the manifest's pin, if any. The error points at the pin.
func (m *Manifest) CheckDigest(digest string) error {
	return checkDigest(m.Digest, digest, m.digestRange, moduleName(m.Dir, m.ModulePath), "manifest")
}

// checkDigest compares a module's digest with the pin at rng in a
// manifest or policy (what).
func checkDigest(pin, digest string, rng hcl.Range, module, what string) error {
	if pin == "" || pin == digest {
		return nil
	}
	return &Error{Diags: hcl.Diagnostics{diagErr(rng,
		"module %s has digest %s, but the %s pins %s", module, digest, what, pin)}}
}

// moduleName is a module's path as errors show it: relative to the
// manifest's directory when it is inside it.
func moduleName(dir, path string) string {
	if rel, err := filepath.Rel(dir, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

// ModuleError returns an error about the module (a failed build, an
// invalid .wasm file) positioned at the module attribute.
func (m *Manifest) ModuleError(err error) error {
	return moduleError(m.moduleRange, moduleName(m.Dir, m.ModulePath), err)
}

func moduleError(rng hcl.Range, module string, err error) error {
	return &moduleErr{diag: &Error{Diags: hcl.Diagnostics{diagErr(rng, "module %s: %v", module, err)}}, err: err}
}

// moduleErr is an *Error about a module that wraps the error it reports,
// so that a caller can tell what it was (errors.Is: an engine's
// sandbox.ErrStaticLimit, ErrTimeout, ErrMemoryLimit) as well as that it
// is the manifest's (errors.As an *Error).
type moduleErr struct {
	diag *Error
	err  error
}

func (e *moduleErr) Error() string   { return e.diag.Error() }
func (e *moduleErr) Unwrap() []error { return []error{e.diag, e.err} }
