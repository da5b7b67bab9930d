package constraint

import (
	"errors"
	"reflect"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
	"cel.dev/cel-go/parser"

	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Given and seen: where a value of a call was before.
//
//	given(v)             true when v (a URL, an e-mail address or an IBAN,
//	                     compared as urls, emails and ibans return them) was
//	                     in the task's input: what the person asked for
//	seen(v, 'pattern')   true when v was in a blob the task read whose
//	                     label carries an integrity taint the pattern
//	                     matches: a taint ("bank:tx") or, ending in "*", a
//	                     prefix of taints ("web:*"), as refuses_taints
//	                     writes them; the pattern is a string literal
//
// So a message may carry only the links the person gave, and a payment
// only an IBAN the bank's own records hold:
//
//	urls(request.body.text).all(u, given(u))
//	ibans(request.body.text).all(i, given(i) || seen(i, 'bank:accounts'))
//
// v is compared in its canonical form: a string that is one URL, one
// address (or a "mailto:" link) or one IBAN, however cased or spaced, is
// that value as the text functions return it; any other string is
// compared as is and is never found (only those three kinds of value are
// recorded). What the kernel records of a task's input and reads, for how
// long and within which bounds (past them both answer false, never true)
// is in kernel/seen.go. A constraint using them on a host whose kernel
// does not provide them (no kernel.ReadsVar in the activation) cannot be
// evaluated, which denies.
//
// They are macros: given(v) becomes mandate_given(mandate_reads, v),
// seen(v, p) mandate_seen(mandate_reads, v, p). Each costs a scan of v
// (one unit per ten bytes) and a lookup; the first given() of a task's
// life also scans its input once (at most kernel.MaxScanBytes), a cost
// the kernel bounds, not the expression's budget.

// readsType is the type of kernel.ReadsVar in expressions.
var readsType = types.NewOpaqueType("mandate.reads")

const (
	givenFn       = "mandate_given"
	seenFn        = "mandate_seen"
	givenOverload = "mandate_given_reads_string"
	seenOverload  = "mandate_seen_reads_string_string"
)

// seenOptions declares the reads variable, the two macros and their
// functions.
func seenOptions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.Variable(kernel.ReadsVar, readsType),
		cel.Macros(
			parser.NewGlobalMacro("given", 1, func(eh parser.ExprHelper, _ ast.Expr, args []ast.Expr) (ast.Expr, *common.Error) {
				return eh.NewCall(givenFn, eh.NewIdent(kernel.ReadsVar), args[0]), nil
			}),
			parser.NewGlobalMacro("seen", 2, func(eh parser.ExprHelper, _ ast.Expr, args []ast.Expr) (ast.Expr, *common.Error) {
				p := args[1]
				if p.Kind() != ast.LiteralKind {
					return nil, eh.NewError(p.ID(), "seen() takes a taint pattern as a string literal, e.g. seen(v, 'bank:*')")
				}
				s, ok := p.AsLiteral().(types.String)
				if !ok {
					return nil, eh.NewError(p.ID(), "seen() takes a taint pattern as a string literal, e.g. seen(v, 'bank:*')")
				}
				if _, err := kindapi.ParseTaintPatterns([]string{string(s)}); err != nil {
					return nil, eh.NewError(p.ID(), "seen(): "+err.Error())
				}
				return eh.NewCall(seenFn, eh.NewIdent(kernel.ReadsVar), args[0], p), nil
			}),
		),
		cel.Function(givenFn, cel.Overload(givenOverload, []*cel.Type{readsType, cel.StringType}, cel.BoolType,
			cel.BinaryBinding(func(r, v ref.Val) ref.Val {
				reads, s, err := readsArgs(r, v)
				if err != nil {
					return err
				}
				return types.Bool(reads.Given(canonical(s)))
			}))),
		cel.Function(seenFn, cel.Overload(seenOverload, []*cel.Type{readsType, cel.StringType, cel.StringType}, cel.BoolType,
			cel.FunctionBinding(func(args ...ref.Val) ref.Val {
				reads, s, err := readsArgs(args[0], args[1])
				if err != nil {
					return err
				}
				p, ok := args[2].(types.String)
				if !ok {
					return types.MaybeNoSuchOverloadErr(args[2])
				}
				pats, perr := kindapi.ParseTaintPatterns([]string{string(p)})
				if perr != nil {
					return types.NewErr("seen: %v", perr)
				}
				return types.Bool(reads.Seen(canonical(s), pats.Match))
			}))),
		cel.CostModel(
			cost.Overload(givenOverload, cost.EvalCost(cost.Sum(cost.Const(cost.CallCost), cost.StringScan(cost.Arg(1))))),
			cost.Overload(seenOverload, cost.EvalCost(cost.Sum(cost.Const(cost.CallCost), cost.StringScan(cost.Arg(1)), cost.StringScan(cost.Arg(2))))),
		),
	}
}

func readsArgs(r, v ref.Val) (kernel.TaskReads, string, ref.Val) {
	rv, ok := r.(readsVal)
	if !ok {
		return nil, "", types.MaybeNoSuchOverloadErr(r)
	}
	s, ok := v.(types.String)
	if !ok {
		return nil, "", types.MaybeNoSuchOverloadErr(v)
	}
	return rv.r, string(s), nil
}

// readsVal is a kernel.TaskReads as a CEL value.
type readsVal struct{ r kernel.TaskReads }

func (v readsVal) ConvertToNative(reflect.Type) (any, error) {
	return nil, errors.New("what a task read is not a value")
}

func (v readsVal) ConvertToType(t ref.Type) ref.Val {
	if t.TypeName() == readsType.TypeName() {
		return v
	}
	return types.NewErr("what a task read is not a %s", t.TypeName())
}

func (v readsVal) Equal(ref.Val) ref.Val { return types.False }
func (v readsVal) Type() ref.Type        { return readsType }
func (v readsVal) Value() any            { return v.r }

// readsActivation resolves kernel.ReadsVar to the CEL value of the
// kernel's TaskReads, every other name from act.
type readsActivation struct {
	interpreter.Activation
	reads readsVal
}

func (a readsActivation) ResolveName(name string) (any, bool) {
	if name == kernel.ReadsVar {
		return a.reads, true
	}
	return a.Activation.ResolveName(name)
}

// activationOf is act as an expression reads it: what the task read, when
// the kernel gives it, as a CEL value.
func activationOf(act map[string]any) (any, error) {
	r, ok := act[kernel.ReadsVar].(kernel.TaskReads)
	if !ok {
		return act, nil
	}
	base, err := interpreter.NewActivation(act)
	if err != nil {
		return nil, err
	}
	return readsActivation{Activation: base, reads: readsVal{r}}, nil
}

// FindValues makes the compiler the kernel's kernel.ValueFinder: the
// values given and seen compare are recorded as the text functions find
// them.
func (c *Compiler) FindValues(s string, max int) ([]string, bool) { return FindValues(s, max) }

var _ kernel.ValueFinder = (*Compiler)(nil)
