package kernel

import (
	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// NewCall makes a Call as the mediator would, with blob as the resolver of
// blob handles named in args. Kinds outside this package use it in tests of
// Prepare; the kernel itself builds Calls directly.
func NewCall(op string, args []byte, scope Scope, task TaskInfo, logger hclog.Logger, blob func(abi.Handle) (*Blob, error)) *Call {
	return &Call{Op: op, Args: args, Scope: scope, Task: task, Logger: logger, blob: blob}
}
