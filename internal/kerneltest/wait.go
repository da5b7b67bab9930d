package kerneltest

import (
	"context"
	"strings"

	"github.com/mandatevm/mandate/sandbox"
)

// WaitEngine compiles every module to one whose run does nothing but wait
// to be stopped: a kernel test starts a task on it and makes the task's
// calls from Go (Task.Invoke, Task.DeriveHandle), where a guest's cap_call
// and cap_derive arrive once their arguments are out of its memory, so
// each call goes through the whole pipeline without a guest.
type WaitEngine struct{}

// WaitModule is what WaitEngine compiles.
type WaitModule struct{}

func (WaitModule) Digest() string              { return "sha256:" + strings.Repeat("0", 64) }
func (WaitModule) Kind() sandbox.ModuleKind    { return sandbox.Command }
func (WaitModule) Close(context.Context) error { return nil }

// Run waits for ctx.
func (WaitModule) Run(ctx context.Context, _ sandbox.RunConfig) error {
	<-ctx.Done()
	return sandbox.ErrCanceled
}

func (WaitEngine) Name() string                                            { return "wait" }
func (WaitEngine) Host(string, []sandbox.HostFunc) error                   { return nil }
func (WaitEngine) Compile(context.Context, []byte) (sandbox.Module, error) { return WaitModule{}, nil }
func (WaitEngine) Close(context.Context) error                             { return nil }
