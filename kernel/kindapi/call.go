package kindapi

import (
	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// NewCall makes a Call as the mediator would, with blob as the resolver of
// blob handles named in args and a public caller. Kinds use it in tests of
// Prepare; a Call made outside the kernel reaches nothing: only the kernel
// runs what a kind prepares.
func NewCall(op string, args []byte, scope Scope, task TaskInfo, logger hclog.Logger, blob func(abi.Handle) (*Blob, error)) *Call {
	return &Call{Op: op, Args: args, Scope: scope, Task: task, Logger: logger, blob: blob}
}
