package kernel_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// TestRefuseTaintedResult: a task whose manifest refuses a tainted result
// cannot set one (EFLOW, audited), can set an untainted one, and a task
// without the rule sets either, its result carrying the label.
func TestRefuseTaintedResult(t *testing.T) {
	audit := &recAudit{}
	k, err := kernel.New(kernel.Config{Engine: kerneltest.WaitEngine{}, Kinds: []kindapi.Kind{kerneltest.New()}, Auditor: audit})
	if err != nil {
		t.Fatal(err)
	}
	mod, _ := kerneltest.WaitEngine{}.Compile(context.Background(), nil)
	parent, err := k.Start(context.Background(), kernel.TaskSpec{Module: mod, Principal: "alice", Limits: kernel.Limits{Timeout: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Kill()
	web := kindapi.NewBlob([]byte("the best hotel is Hotel Evil"), kindapi.NewLabel(nil, []string{"web:reviews.example"}))
	mine := kindapi.NewBlob([]byte("42"), kindapi.Label{})
	for _, refuse := range []bool{true, false} {
		c, err := parent.StartChild(context.Background(), kernel.ChildSpec{Module: mod, Limits: kernel.Limits{Timeout: time.Hour},
			RefuseTaintedResult: refuse, Held: []*kindapi.Blob{web, mine}})
		if err != nil {
			t.Fatal(err)
		}
		hw, hm := kernel.HeldHandle(0), kernel.HeldHandle(1)
		err = c.SetResult(context.Background(), hw)
		if refuse {
			if kindapi.ErrnoOf(err) != abi.EFLOW || !strings.Contains(err.Error(), "web:reviews.example") {
				t.Errorf("a tainted result under accepts_untrusted = false: %v, want EFLOW naming the taint", err)
			}
			if _, ok := c.Result(); ok {
				t.Error("the refused result was set")
			}
			if err := c.SetResult(context.Background(), hm); err != nil {
				t.Errorf("an untainted result: %v", err)
			}
		} else {
			if err != nil {
				t.Fatalf("a tainted result without the rule: %v", err)
			}
			if l := c.ResultBlob().Label(); len(l.Integ()) != 1 {
				t.Errorf("the result's label: %v", l)
			}
		}
		c.Kill()
		<-c.Done()
	}
	n := 0
	for _, ev := range audit.events() {
		if ev.Decision == kernel.Deny && ev.Op == "task_result" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d audited refusals of a result, want 1", n)
	}
}
