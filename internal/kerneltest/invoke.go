package kerneltest

import (
	"context"

	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Invoke prepares call on kind, takes the kind's own reservation
// (Op.Reserve) and runs its effect, with none of the kernel's checks
// between (no flow, constraints, approval, uses, audit): for tests of what
// a kind itself decides and does. Tests of the whole pipeline run a
// kernel.
func Invoke(ctx context.Context, kind kindapi.Kind, call *kindapi.Call) (*kindapi.Result, error) {
	op, err := kind.Prepare(call)
	if err != nil {
		return nil, err
	}
	return Run(ctx, op)
}

// Run runs a prepared op as the kernel does once it decided to: the
// kind's own reservation first (Op.Reserve: pay claims its idempotency key
// there), then the effect.
func Run(ctx context.Context, op kindapi.Op) (*kindapi.Result, error) {
	if op.Reserve != nil {
		release, _, err := op.Reserve()
		if err != nil {
			return nil, err
		}
		if op.Effect == nil && release != nil {
			release()
		}
	}
	if op.Effect == nil {
		return nil, nil
	}
	return op.Effect(ctx)
}

// Vars prepares call on kind and returns what its constraints would see.
func Vars(kind kindapi.Kind, call *kindapi.Call) (map[string]any, error) {
	op, err := kind.Prepare(call)
	if err != nil {
		return nil, err
	}
	if op.Vars == nil {
		v, err := kindapi.DecodeJSONValue(call.Args)
		if err != nil {
			return nil, err
		}
		return map[string]any{"args": v}, nil
	}
	return op.Vars()
}
