// Package kindtest helps test a capability kind on its own, without a
// kernel: it makes the calls the kernel would hand the kind.
package kindtest

import (
	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// NewCall makes a [kindapi.Call] as the mediator would, with blob as the
// resolver of blob handles named in args and a public caller. Kinds use it
// in tests of Prepare; a [kindapi.Call] made outside the kernel reaches
// nothing: only the kernel runs what a kind prepares.
func NewCall(op string, args []byte, scope kindapi.Scope, task kindapi.TaskInfo, logger hclog.Logger, blob func(abi.Handle) (*kindapi.Blob, error)) *kindapi.Call {
	c := new(kindapi.Call)
	c.Init(op, args, scope, task, logger, blob, nil)
	return c
}
