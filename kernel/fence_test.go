package kernel_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel"
)

// fenceAuditor keeps every audit event.
type fenceAuditor struct {
	mu  sync.Mutex
	evs []kernel.AuditEvent
}

func (a *fenceAuditor) Record(_ context.Context, ev kernel.AuditEvent) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.evs = append(a.evs, ev)
	return nil
}

// TestFence: once the host's fence says no (a fleet node's lease on the
// run expired), the task's next call is refused EINTERNAL, audited as a
// denial with the fence's reason, and its effect is not performed; the
// calls before it were allowed and performed.
func TestFence(t *testing.T) {
	var open atomic.Bool
	open.Store(true)
	rec := &fenceAuditor{}
	e := newEnv(t, func(c *kernel.Config) {
		c.Auditor = rec
		c.Fence = func() error {
			if open.Load() {
				return nil
			}
			return errors.New("this node's lease on the run has expired")
		}
	})
	spec := e.spec(t, "revoke-wait", kernel.Limits{Timeout: time.Minute}, "")
	spec.Grants[0].Audit = true
	task, err := e.k.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	for e.kind.Calls.Load() < 5 {
		time.Sleep(time.Millisecond)
	}
	open.Store(false)
	performed := e.kind.Calls.Load()
	if err := task.Wait(context.Background()); err != nil {
		t.Fatalf("task: %v", err)
	}
	if got, _ := task.Result(); string(got) != "EINTERNAL" {
		t.Fatalf("result %q, want EINTERNAL", got)
	}
	if got := e.kind.Calls.Load(); got > performed+1 {
		t.Errorf("%d effects performed after the fence closed (%d before; one may have been past it)", got-performed, performed)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	last := rec.evs[len(rec.evs)-1]
	if last.Decision != kernel.Deny || last.Errno != abi.EINTERNAL || last.Op != "call:noop" {
		t.Errorf("last audit event %+v, want a denied call:noop with EINTERNAL", last)
	}
}
