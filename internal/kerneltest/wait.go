package kerneltest

import (
	"context"

	"github.com/mandatevm/mandate/sandbox"
)

// WaitEngine compiles every module to sandbox.IdleModule, whose run does
// nothing but wait to be stopped: a kernel test starts a task on it and
// makes the task's calls from Go (Task.Invoke, Task.DeriveHandle), where a
// guest's cap_call and cap_derive arrive once their arguments are out of
// its memory, so each call goes through the whole pipeline without a
// guest.
type WaitEngine struct{}

func (WaitEngine) Name() string                          { return "wait" }
func (WaitEngine) Host(string, []sandbox.HostFunc) error { return nil }
func (WaitEngine) Compile(context.Context, []byte) (sandbox.Module, error) {
	return sandbox.IdleModule{}, nil
}
func (WaitEngine) CompileWith(context.Context, []byte, sandbox.CompileConfig) (sandbox.Module, error) {
	return sandbox.IdleModule{}, nil
}
func (WaitEngine) Close(context.Context) error { return nil }
