package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/mandatevm/mandate/guest-sdk/abi"
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

// Activator is implemented by kinds whose calls can be constrained: it
// names the variables an expression may use and computes their values
// for a call. A kind without it exposes one variable, "args", the call's
// argument document decoded as JSON.
type Activator interface {
	Vars() []string
	Activation(call *Call) (map[string]any, error)
}

// Constraints are the expressions a capability carries.
type Constraints struct {
	When        []Constraint
	ApproveWhen []Constraint
}

func (cs Constraints) empty() bool { return len(cs.When) == 0 && len(cs.ApproveWhen) == 0 }

// ConstraintVars returns the variables constraints on kind may use.
func ConstraintVars(kind Kind) []string {
	if a, ok := kind.(Activator); ok {
		return a.Vars()
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
	vars := ConstraintVars(kd)
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
	return cs, nil
}

// hasConstraints reports whether c or an ancestor carries any.
func hasConstraints(c *Cap) bool {
	for x := c; x != nil; x = x.parent {
		if !x.cons.empty() {
			return true
		}
	}
	return false
}

// checkConstraints evaluates every `when` of c and its ancestors against
// the call, and reports whether an `approve_when` of any of them matched.
func checkConstraints(ctx context.Context, c *Cap, call *Call) (needApproval []string, err error) {
	act, err := activation(c.kind, call)
	if err != nil {
		return nil, Errorf(abi.EDENIED, "constraints cannot be evaluated: %v", err)
	}
	for x := c; x != nil; x = x.parent {
		for _, w := range x.cons.When {
			ok, err := w.Eval(ctx, act)
			if err != nil {
				return nil, Errorf(abi.EDENIED, "constraint %q (on %s) cannot be evaluated: %v", w.Source(), x.id, err)
			}
			if !ok {
				return nil, Errorf(abi.EDENIED, "constraint %q (on %s) does not hold", w.Source(), x.id)
			}
		}
		for _, a := range x.cons.ApproveWhen {
			ok, err := a.Eval(ctx, act)
			if err != nil {
				return nil, Errorf(abi.EDENIED, "approve_when %q (on %s) cannot be evaluated: %v", a.Source(), x.id, err)
			}
			if ok {
				needApproval = append(needApproval, a.Source())
			}
		}
	}
	return needApproval, nil
}

func activation(kind Kind, call *Call) (map[string]any, error) {
	if a, ok := kind.(Activator); ok {
		return a.Activation(call)
	}
	v, err := DecodeJSONValue(call.Args)
	if err != nil {
		return nil, err
	}
	return map[string]any{"args": v}, nil
}

// DecodeJSONValue decodes a JSON document for a constraint activation:
// objects become map[string]any, whole numbers int64 (so `amount <= 50`
// compares integers), other numbers float64. Empty input is an empty
// object.
func DecodeJSONValue(b []byte) (any, error) {
	if len(b) == 0 {
		return map[string]any{}, nil
	}
	var v any
	if err := abi.DecodeJSONNumber(b, &v); err != nil {
		return nil, err
	}
	return normaliseNumbers(v), nil
}

func normaliseNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = normaliseNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normaliseNumbers(e)
		}
	}
	return v
}

// splitConstraintReq removes "when" and "approve_when" from a derive
// request, returning the rest for the kind.
func splitConstraintReq(req []byte) (rest []byte, when, approveWhen []string, err error) {
	var m map[string]json.RawMessage
	if err := abi.DecodeJSON(req, &m); err != nil || m == nil {
		return req, nil, nil, nil // the kind reports malformed requests
	}
	take := func(key string) ([]string, error) {
		raw, ok := m[key]
		if !ok {
			return nil, nil
		}
		delete(m, key)
		var one string
		if json.Unmarshal(raw, &one) == nil {
			return []string{one}, nil
		}
		var many []string
		if err := json.Unmarshal(raw, &many); err != nil {
			return nil, Errorf(abi.EINVAL, "%s must be a string or a list of strings", key)
		}
		return slices.DeleteFunc(many, func(s string) bool { return s == "" }), nil
	}
	if when, err = take("when"); err != nil {
		return nil, nil, nil, err
	}
	if approveWhen, err = take("approve_when"); err != nil {
		return nil, nil, nil, err
	}
	if when == nil && approveWhen == nil {
		return req, nil, nil, nil
	}
	rest, _ = json.Marshal(m)
	return rest, when, approveWhen, nil
}
