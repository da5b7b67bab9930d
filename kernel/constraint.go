package kernel

import (
	"context"
	"fmt"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Constraint is a compiled predicate over a call's arguments: a `when`
// (the use is allowed only if it holds) or an `approve_when` (a use for
// which it holds needs a person's yes). Constraints accumulate down the
// derivation tree: every ancestor's are checked on every use (law 5).
//
// The kernel does not parse constraint languages; a ConstraintCompiler
// (package constraint, CEL) plugs in through Config.
type Constraint interface {
	// Source is the expression as written.
	Source() string
	// Eval reports whether the constraint holds for the activation. An
	// error (a missing field, a wrong type, the cost limit) means it
	// could not be decided; the kernel then denies.
	Eval(ctx context.Context, act map[string]any) (bool, error)
}

// ConstraintCompiler compiles expressions over a kind's variables.
type ConstraintCompiler interface {
	Compile(src string, vars []string) (Constraint, error)
}

// Constraints are the expressions a capability carries.
type Constraints struct {
	When        []Constraint
	ApproveWhen []Constraint
}

func (cs Constraints) empty() bool { return len(cs.When) == 0 && len(cs.ApproveWhen) == 0 }

// ConstraintVars returns the variables constraints on kind may use.
func ConstraintVars(kind kindapi.Kind) []string {
	if v := kind.Info().Vars; v != nil {
		return v
	}
	return []string{"args"}
}

// CompileConstraints compiles `when` and `approve_when` expressions for a
// capability of the named kind. Errors name the expression.
func (k *Kernel) CompileConstraints(kind string, when, approveWhen []string) (Constraints, error) {
	var cs Constraints
	if len(when) == 0 && len(approveWhen) == 0 {
		return cs, nil
	}
	kd, ok := k.kinds[kind]
	if !ok {
		return cs, fmt.Errorf("unknown capability kind %q", kind)
	}
	if k.compiler == nil {
		return cs, fmt.Errorf("constraints are not supported: the kernel has no constraint compiler")
	}
	vars := kd.vars
	for _, src := range when {
		c, err := k.compiler.Compile(src, vars)
		if err != nil {
			return Constraints{}, fmt.Errorf("when %q: %w", src, err)
		}
		cs.When = append(cs.When, c)
	}
	for _, src := range approveWhen {
		c, err := k.compiler.Compile(src, vars)
		if err != nil {
			return Constraints{}, fmt.Errorf("approve_when %q: %w", src, err)
		}
		cs.ApproveWhen = append(cs.ApproveWhen, c)
	}
	if cs.References(ReadsVar) {
		k.seenUsed.Store(true) // tasks record what they read from now on (seen.go)
	}
	return cs, nil
}

// checkConstraints evaluates every `when` of c and its ancestors against
// the prepared call, and reports each `approve_when` of any of them that
// matched. On a chain whose constraints read uses, the call is recorded
// as pending in r (history.go).
func checkConstraints(ctx context.Context, t *Task, c *Cap, call *kindapi.Call, op *kindapi.Op, r *reservation) (needApproval []string, err error) {
	act, err := activation(call, op)
	if err != nil {
		return nil, kindapi.Errorf(abi.EDENIED, "constraints cannot be evaluated: %v", err)
	}
	act[ReadsVar] = readsView{t}
	if c.chain&(chainHistory|chainNow) != 0 {
		return checkWithHistory(ctx, c, act, r)
	}
	return evalConstraints(ctx, c, act)
}

// evalConstraints evaluates the constraints of c's chain on act.
//
// Preconditions: the locks of the chain's histories are held, when it
// has any (checkWithHistory).
func evalConstraints(ctx context.Context, c *Cap, act map[string]any) (needApproval []string, err error) {
	for x := c; x != nil; x = x.parent {
		if c.chain&chainHistory != 0 {
			showUses(x, act)
		}
		for _, w := range x.cons.When {
			ok, err := w.Eval(ctx, act)
			if err != nil {
				return nil, kindapi.Errorf(abi.EDENIED, "constraint %q (on %s) cannot be evaluated: %v", w.Source(), x.id, err)
			}
			if !ok {
				return nil, kindapi.Errorf(abi.EDENIED, "constraint %q (on %s) does not hold", w.Source(), x.id)
			}
		}
		for _, a := range x.cons.ApproveWhen {
			ok, err := a.Eval(ctx, act)
			if err != nil {
				return nil, kindapi.Errorf(abi.EDENIED, "approve_when %q (on %s) cannot be evaluated: %v", a.Source(), x.id, err)
			}
			if ok {
				needApproval = append(needApproval, fmt.Sprintf("approve_when %q (on %s) matched", a.Source(), x.id))
			}
		}
	}
	return needApproval, nil
}

func activation(call *kindapi.Call, op *kindapi.Op) (map[string]any, error) {
	var act map[string]any
	if op.Vars != nil {
		vars, err := op.Vars()
		if err != nil {
			return nil, err
		}
		act = vars
	} else {
		v, err := kindapi.DecodeJSONValue(call.Args)
		if err != nil {
			return nil, err
		}
		act = map[string]any{"args": v}
	}
	act[ProvenanceVar] = provenance(op)
	return act, nil
}
