package manifest

// Limits blocks: the bounds on memory, time, handles, output and blobs,
// on what the run store keeps of each task's result and output, on what
// the task's module may contain and what compiling it may cost, and the
// sizes they are written in.

import (
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel"
	"github.com/zclconf/go-cty/cty"
)

// Bounds on limits. Memory is bounded by 32-bit linear memory; output by
// what is sensible to keep in the host.
const (
	MaxMemory    = 4 << 30
	MaxOutput    = 1 << 30
	MaxBlobBytes = 16 << 30
	// MaxStoredOutput bounds limits.stored_output: what the run store
	// keeps of one task's result or stream.
	MaxStoredOutput = 1 << 30
)

// Bounds on the static limits of a task's module (sandbox.StaticLimits),
// which a manifest may set below or above their defaults
// (sandbox.DefaultStaticLimits) up to these: wasmtime's own limits on
// functions and locals, and far past any compiler's comfort for the rest.
// Compiling may use at most MaxCompileMemory.
const (
	MaxFunctions      = 1_000_000
	MaxLocals         = 50_000
	MaxNesting        = 100_000
	MaxBrTableTargets = 1_000_000
	MaxFunctionSize   = 64 << 20
	MaxCompileMemory  = 16 << 30
)

func (p *parser) limits(b *hcl.Block, l *kernel.Limits) {
	if len(b.Labels) != 0 {
		p.add(diagErr(b.DefRange, "limits takes no labels"))
	}
	content, diags := bodyContent(b.Body, limitsSchema)
	p.add(diags...)
	if a, ok := content.Attributes["memory"]; ok {
		if n, ok := p.size(a, MaxMemory); ok {
			l.Memory = n
		}
	}
	if a, ok := content.Attributes["output"]; ok {
		if n, ok := p.size(a, MaxOutput); ok {
			l.MaxOutput = int(n)
		}
	}
	if a, ok := content.Attributes["blobs"]; ok {
		if n, ok := p.size(a, MaxBlobBytes); ok {
			l.MaxBlobBytes = int64(n)
		}
	}
	if a, ok := content.Attributes["stored_output"]; ok {
		if n, ok := p.size(a, MaxStoredOutput); ok {
			l.MaxStoredOutput = int64(n)
		}
	}
	for _, c := range []struct {
		name string
		max  int64
		to   *int
	}{
		{"functions", MaxFunctions, &l.Functions},
		{"locals", MaxLocals, &l.Locals},
		{"nesting", MaxNesting, &l.Nesting},
		{"br_table_targets", MaxBrTableTargets, &l.BrTableTargets},
	} {
		if a, ok := content.Attributes[c.name]; ok {
			if n, ok := p.count(a, c.max); ok {
				*c.to = int(n)
			}
		}
	}
	if a, ok := content.Attributes["function_size"]; ok {
		if n, ok := p.size(a, MaxFunctionSize); ok {
			l.FunctionSize = int(n)
		}
	}
	if a, ok := content.Attributes["compile_memory"]; ok {
		if n, ok := p.size(a, MaxCompileMemory); ok {
			l.CompileMemory = n
		}
	}
	if a, ok := content.Attributes["timeout"]; ok {
		if s, ok := p.str(a, true); ok {
			d, err := time.ParseDuration(strings.TrimSpace(s))
			switch {
			case err != nil:
				p.add(diagErr(a.Expr.Range(), `timeout %q is not a duration (examples: "30s", "2m", "1h30m")`, s))
			case d <= 0:
				p.add(diagErr(a.Expr.Range(), "timeout %q must be positive", s))
			default:
				l.Timeout = d
			}
		}
	}
	if a, ok := content.Attributes["handles"]; ok {
		if v, ok := p.eval(a.Expr); ok {
			n, ok := wholeNumber(v)
			switch {
			case !ok:
				p.add(diagErr(a.Expr.Range(), "handles must be a whole number, not %s", describe(v)))
			case n < 1 || n > kernel.MaxHandles:
				p.add(diagErr(a.Expr.Range(), "handles = %d is out of range: 1 to %d", n, kernel.MaxHandles))
			default:
				l.MaxHandles = int(n)
			}
		}
	}
}

// count evaluates a count attribute: a whole number from 1 to max.
func (p *parser) count(a *hcl.Attribute, max int64) (int64, bool) {
	v, ok := p.eval(a.Expr)
	if !ok {
		return 0, false
	}
	n, ok := wholeNumber(v)
	switch {
	case !ok:
		p.add(diagErr(a.Expr.Range(), "%s must be a whole number, not %s", a.Name, describe(v)))
	case n < 1 || n > max:
		p.add(diagErr(a.Expr.Range(), "%s = %d is out of range: 1 to %d", a.Name, n, max))
	default:
		return n, true
	}
	return 0, false
}

// size evaluates a size attribute: a whole number of bytes, or a string
// such as "64MiB".
func (p *parser) size(a *hcl.Attribute, max uint64) (uint64, bool) {
	v, ok := p.eval(a.Expr)
	if !ok {
		return 0, false
	}
	var n uint64
	switch {
	case !v.IsNull() && v.Type() == cty.String:
		var err error
		n, err = ParseSize(v.AsString())
		if err != nil {
			p.add(diagErr(a.Expr.Range(), "%s: %v", a.Name, err))
			return 0, false
		}
	default:
		i, ok := wholeNumber(v)
		if !ok || i < 0 {
			p.add(diagErr(a.Expr.Range(), `%s must be a size such as "64MiB" or a whole number of bytes, not %s`, a.Name, describe(v)))
			return 0, false
		}
		n = uint64(i)
	}
	if n == 0 || n > max {
		p.add(diagErr(a.Expr.Range(), "%s = %d bytes is out of range: 1 to %d", a.Name, n, max))
		return 0, false
	}
	return n, true
}

// ParseSize parses a size such as "64MiB"; see abi.ParseSize.
func ParseSize(s string) (uint64, error) { return abi.ParseSize(s) }
