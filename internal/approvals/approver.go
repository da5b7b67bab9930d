package approvals

import (
	"context"
	"fmt"
	"time"

	"github.com/mandatevm/mandate/kernel"
)

// DefaultTimeout is how long an Approver waits for the person.
const DefaultTimeout = 10 * time.Minute

// Approver is a kernel.Approver that asks through the store and waits for
// the person's answer (mandate ui's approvals page, mandate approvals).
type Approver struct {
	Store *Store
	// Run is the run asking (its run store id), if known.
	Run string
	// Waiter names who waits, e.g. "mandate mcp serve desk.hcl".
	Waiter string
	// Timeout is how long to wait; 0 means DefaultTimeout. Past it the
	// approval is expired: a refusal on kernel.ChannelTimeout.
	Timeout time.Duration
	// Asked, when set, is called once the approval is pending, before
	// waiting: to say where to answer it.
	Asked func(ctx context.Context, a Approval)
}

var _ kernel.Approver = (*Approver)(nil)

// Approve records req as pending, calls Asked, and waits for the answer:
// approved or refused as the person answered; expired, a refusal on
// kernel.ChannelTimeout (no error). When ctx ends first the approval is
// withdrawn and ctx's error returned.
func (ap *Approver) Approve(ctx context.Context, req kernel.ApprovalRequest) (kernel.Answer, error) {
	timeout := ap.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	a, err := ap.Store.Add(ctx, Approval{Run: ap.Run, Waiter: ap.Waiter, Request: req, Expires: time.Now().Add(timeout)})
	if err != nil {
		return kernel.Answer{}, err
	}
	if ap.Asked != nil {
		ap.Asked(ctx, a)
	}
	got, err := ap.Store.Wait(ctx, a.ID)
	if err != nil {
		if ctx.Err() != nil {
			why := fmt.Sprintf("the call ended before an answer (%v)", ctx.Err())
			_ = ap.Store.Withdraw(context.WithoutCancel(ctx), a.ID, why)
			return kernel.Answer{}, ctx.Err()
		}
		return kernel.Answer{}, err
	}
	switch got.State {
	case StateApproved:
		return kernel.Answer{Yes: true, Channel: got.Channel, By: got.By}, nil
	case StateRefused:
		return kernel.Answer{Channel: got.Channel, By: got.By}, nil
	case StateExpired:
		return kernel.Answer{Channel: kernel.ChannelTimeout, By: "nobody answered in " + timeout.String()}, nil
	}
	return kernel.Answer{Channel: kernel.ChannelNone, By: got.State + ": " + got.Note}, nil
}
