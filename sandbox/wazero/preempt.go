package wazero

import (
	"context"
	"errors"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/mandatevm/mandate/sandbox/internal/wasmbin"
)

// Stopping a guest
//
// Every module is rewritten at compile time by wasmbin.Preempt (see
// preempt.go there): each loop header and function entry pays a weight
// from a budget in a global and tests a stop flag, and calls the host
// function yield, below, when the budget is spent or the flag is set. Run
// sets the flag when the run's context is done (armStop), and yield ends
// the run with the exit code wazero's own WithCloseOnContextDone uses, so
// outcome maps it to sandbox.ErrTimeout or sandbox.ErrCanceled as before.
// Spending the budget returns to Go every wasmbin.PreemptBudget units of
// work, which is what lets the Go runtime preempt a spinning guest (a
// stop-the-world garbage collection would otherwise wait for it forever).
//
// A module the rewrite can not handle is refused (Compile fails): the
// decoder knows every instruction of the proposals wazero enables here, so
// no module wazero would run is refused for its instructions; keeping
// WithCloseOnContextDone for such modules would need a second runtime.
// The compilation cache is keyed by the bytes compiled, which are the
// rewritten ones, and by whether WithCloseOnContextDone is on (wazero's
// module ID): code cached by an engine that still used it is not reused.

// preemption is how a running guest is stopped.
type preemption int

const (
	// preemptRewrite: wasmbin.Preempt's checks (the default).
	preemptRewrite preemption = iota
	// preemptCloseOnDone: wazero's WithCloseOnContextDone, which calls into
	// Go at every loop header (benchmarks only: what was used before).
	preemptCloseOnDone
	// preemptNone: no check at all (benchmarks only: a spinning guest can
	// not be stopped, nor can the Go runtime stop the world while one runs).
	preemptNone
)

// instantiateYield instantiates the host module the rewritten modules
// import wasmbin.PreemptYield from.
func instantiateYield(ctx context.Context, rt wazero.Runtime) error {
	_, err := rt.NewHostModuleBuilder(wasmbin.PreemptModule).
		NewFunctionBuilder().
		WithGoFunction(api.GoFunc(yield), nil, nil).
		WithName(wasmbin.PreemptYield).
		Export(wasmbin.PreemptYield).
		Instantiate(ctx)
	return err
}

// yield is wasmbin.PreemptYield: the guest has spent its budget or its
// stop flag is set. It returns unless ctx (the context of the call into the
// guest: Run's, with its timeout) is done; then it ends the run as
// WithCloseOnContextDone would, with the exit code of a deadline or a
// cancellation, which wazero returns as the call's error. The call itself
// is the point: it leaves compiled code, so the Go runtime can preempt the
// goroutine here.
func yield(ctx context.Context, _ []uint64) {
	if err := ctx.Err(); err != nil {
		code := uint32(sys.ExitCodeContextCanceled)
		if errors.Is(err, context.DeadlineExceeded) {
			code = sys.ExitCodeDeadlineExceeded
		}
		panic(sys.NewExitError(code))
	}
}

// armStop sets inst's stop flag once ctx is done, so the guest calls yield
// at its next loop header or function entry instead of when its budget is
// spent. The returned function disarms it. A module without the flag (one
// with no functions, or compiled by an engine without the rewrite) needs
// nothing.
func armStop(ctx context.Context, inst api.Module) func() {
	g, ok := inst.ExportedGlobal(wasmbin.StopExport).(api.MutableGlobal)
	if !ok {
		return func() {}
	}
	// The guest reads the flag from compiled code only; this is the one
	// Go write to it, so nothing races with it.
	stop := context.AfterFunc(ctx, func() { g.Set(wasmbin.StopValue) })
	return func() { stop() }
}

// rewrite returns what the engine compiles of src: src rewritten by
// wasmbin.Preempt when the engine stops guests that way, and then by
// wasmbin.Devirtualize unless options.noDevirt is set.
func (e *Engine) rewrite(src []byte) ([]byte, error) {
	if e.opt.preempt == preemptRewrite {
		var err error
		if src, err = wasmbin.Preempt(src, e.opt.budget()); err != nil {
			return nil, err
		}
	}
	if !e.opt.noDevirt {
		// A module it does not apply to keeps its table.
		src, _ = wasmbin.Devirtualize(src)
	}
	return src, nil
}

// budget is the preemption budget: wasmbin.PreemptBudget unless a test or
// benchmark set another.
func (o options) budget() uint32 {
	if o.preemptBudget != 0 {
		return o.preemptBudget
	}
	return wasmbin.PreemptBudget
}
