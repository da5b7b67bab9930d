// Package constraint compiles the `when` and `approve_when` expressions a
// capability carries, in CEL (cel.dev/cel-go), for the kernel
// (kernel.ConstraintCompiler). Expressions see the variables the
// capability's kind declares (for net: request; for a kind without its own:
// args) as dynamic JSON-like values, must return a bool, and are bounded by
// a cost limit:
//
//	c := constraint.New()
//	k, _ := kernel.New(kernel.Config{Engine: eng, Kinds: kinds, Constraints: c})
//	cons, err := k.CompileConstraints("net", []string{
//		`request.method == "POST" && request.body.amount <= 50`,
//	}, nil)
//
// A missing field, a type mismatch or an exhausted cost budget is an
// evaluation error, which the kernel turns into a denial.
//
// Besides CEL's own, expressions have functions of the kernel's: where a
// value came from, spliced(x) and from(x) (provenance.go); earlier uses,
// uses, now and sum (history.go); the URLs, e-mail addresses and IBANs in
// a string, urls(s), emails(s) and ibans(s) (text.go); and whether such a
// value was in the task's input or in what it read from a source,
// given(v) and seen(v, 'pattern') (seen.go). So a message may carry only
// the links the person gave:
//
//	urls(request.body.text).all(u, given(u))
package constraint

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"cel.dev/cel-go/cel"
	"github.com/mandatevm/mandate/kernel"
)

// Limits on expressions.
const (
	// MaxSourceLen bounds an expression's text.
	MaxSourceLen = 4096
	// DefaultCostLimit bounds the work of one evaluation (CEL's cost
	// units: roughly one per operation, more for string and list work).
	DefaultCostLimit = 100_000
)

// Compiler compiles CEL constraints. It is safe for concurrent use.
type Compiler struct {
	costLimit uint64

	mu   sync.Mutex
	envs map[string]*cel.Env // by variable set; protected by mu
}

var _ kernel.ConstraintCompiler = (*Compiler)(nil)

// Option configures a Compiler.
type Option func(*Compiler)

// WithCostLimit sets the cost limit of one evaluation.
func WithCostLimit(n uint64) Option { return func(c *Compiler) { c.costLimit = n } }

// New returns a compiler.
func New(opts ...Option) *Compiler {
	c := &Compiler{costLimit: DefaultCostLimit, envs: map[string]*cel.Env{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

func (c *Compiler) env(vars []string) (*cel.Env, error) {
	key := fmt.Sprint(vars)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.envs[key]; ok {
		return e, nil
	}
	opts := []cel.EnvOption{cel.CrossTypeNumericComparisons(true)}
	opts = append(opts, provenanceOptions()...)
	opts = append(opts, historyOptions()...)
	opts = append(opts, textOptions()...)
	opts = append(opts, seenOptions()...)
	for _, v := range vars {
		opts = append(opts, cel.Variable(v, cel.DynType))
	}
	e, err := cel.NewEnv(opts...)
	if err != nil {
		return nil, err
	}
	c.envs[key] = e
	return e, nil
}

// Compile parses and checks src over vars. The result must be a bool.
func (c *Compiler) Compile(src string, vars []string) (kernel.Constraint, error) {
	if len(src) > MaxSourceLen {
		return nil, fmt.Errorf("expression of %d bytes exceeds %d", len(src), MaxSourceLen)
	}
	env, err := c.env(vars)
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(src)
	if iss.Err() != nil {
		return nil, errors.New(iss.Err().Error())
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("expression is %s, want bool", t)
	}
	if err := checkSums(ast); err != nil {
		return nil, err
	}
	prg, err := env.Program(ast, cel.CostLimit(c.costLimit), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, err
	}
	return &expr{src: src, prg: prg, refs: references(ast)}, nil
}

type expr struct {
	src  string
	prg  cel.Program
	refs []string // the variables it reads, sorted
}

var _ kernel.Referencer = (*expr)(nil)

func (e *expr) Source() string { return e.src }

// References reports whether the expression reads the variable name.
func (e *expr) References(name string) bool {
	_, ok := slices.BinarySearch(e.refs, name)
	return ok
}

// Eval evaluates the expression. Anything but a bool result is an error.
func (e *expr) Eval(ctx context.Context, act map[string]any) (bool, error) {
	var in any = act
	if e.References(kernel.ReadsVar) { // given or seen (seen.go)
		var err error
		if in, err = activationOf(act); err != nil {
			return false, err
		}
	}
	out, _, err := e.prg.ContextEval(ctx, in)
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("result is %s, not bool", out.Type())
	}
	return b, nil
}
