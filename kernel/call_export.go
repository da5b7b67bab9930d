package kernel

import (
	"context"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
)

// NewCall makes a Call as the mediator would, with blob as the resolver of
// blob handles named in args. Kinds outside this package use it in tests;
// the kernel itself builds Calls directly.
func NewCall(op string, args []byte, scope Scope, task TaskInfo, logger hclog.Logger, blob func(abi.Handle) (*Blob, error)) *Call {
	return &Call{Op: op, Args: args, Scope: scope, Task: task, Logger: logger, blob: blob}
}

// WithApprover makes c ask approve when the kind calls Approve (tests of
// kinds use it; the kernel wires its Approver itself).
func (c *Call) WithApprover(approve func(ctx context.Context, summary string, details map[string]any) error) *Call {
	c.approve = approve
	return c
}
