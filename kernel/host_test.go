package kernel_test

import (
	"context"
	"testing"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel"
)

// TestHostChildren: a host's session task floats up with what it was
// shown (Observe, bounded by its clearance); a child the host starts for
// it starts at its label, within its clearance, holds the blobs it is
// given unread, and is killed when its call is canceled or its parent
// ends.
func TestHostChildren(t *testing.T) {
	k, err := kernel.New(kernel.Config{Engine: kerneltest.WaitEngine{}, Kinds: []kernel.Kind{kerneltest.New()}})
	if err != nil {
		t.Fatal(err)
	}
	mod, _ := kerneltest.WaitEngine{}.Compile(context.Background(), nil)
	pii := kernel.NewLabel([]string{"pii:alice"}, nil)
	session, err := k.Start(context.Background(), kernel.TaskSpec{Module: mod, Principal: "alice", Clearance: &pii,
		Limits: kernel.Limits{Timeout: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	if err := session.Observe(kernel.NewLabel([]string{"pii:bob"}, nil)); kernel.ErrnoOf(err) != abi.EFLOW || !session.Label().IsZero() {
		t.Fatalf("observing above the clearance: %v, label %v", err, session.Label())
	}
	public := kernel.Label{}
	scope, _ := k.Grant("test", kernel.GrantContext{}, []byte(`{"level":1,"clearance":[]}`))
	spec := func(c *kernel.Label) kernel.TaskSpec {
		return kernel.TaskSpec{Module: mod, Principal: "alice", Clearance: c, Limits: kernel.Limits{Timeout: time.Hour},
			Grants: []kernel.GrantSpec{{Name: "sink", Kind: "test", Scope: scope}}}
	}
	// Before the session saw anything: a public child is fine.
	p, err := k.NewChild(session, spec(&public))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-p.Task().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("canceling the call did not end the child")
	}
	// Once it has seen Alice's data, a child cleared for public data
	// cannot start, and one with the session's clearance starts labelled.
	if err := session.Observe(pii); err != nil {
		t.Fatal(err)
	}
	if _, err := k.NewChild(session, spec(&public)); kernel.ErrnoOf(err) != abi.EFLOW {
		t.Fatalf("a public child of a session that saw PII: %v, want EFLOW", err)
	}
	wide := kernel.NewLabel([]string{"pii:alice", "pii:bob"}, nil)
	if _, err := k.NewChild(session, spec(&wide)); kernel.ErrnoOf(err) != abi.EFLOW {
		t.Fatalf("a child cleared above its parent: %v, want EFLOW", err)
	}
	p, err = k.NewChild(session, spec(nil))
	if err != nil {
		t.Fatal(err)
	}
	c := p.Task()
	if l := c.Label(); len(l.Conf()) != 1 {
		t.Fatalf("the child starts at %v, want its parent's label", l)
	}
	h, err := p.Hold(kernel.NewBlob([]byte("X1234567"), pii))
	if err != nil || h == 0 {
		t.Fatalf("hold: %v", err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The child's sink is public: its label, from the session, is not.
	sh, err := c.Lookup(context.Background(), "sink")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Invoke(context.Background(), sh, "echo", []byte(`{}`)); kernel.ErrnoOf(err) != abi.EFLOW {
		t.Errorf("the child's call to a public sink: %v, want EFLOW", err)
	}
	// A capability passed from the session shares its uses across
	// children.
	once, _ := k.Grant("test", kernel.GrantContext{}, []byte(`{"level":1}`))
	s2, err := k.Start(context.Background(), kernel.TaskSpec{Module: mod, Principal: "alice", Limits: kernel.Limits{Timeout: time.Hour},
		Grants: []kernel.GrantSpec{{Name: "tool.once", Kind: "test", Scope: once, Allowance: kernel.Allowance{MaxUses: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Kill()
	root, _ := s2.CapByName("tool.once")
	for i, want := range []abi.Errno{abi.ESUCCESS, abi.ELIMIT} {
		p, err := k.NewChild(s2, kernel.TaskSpec{Module: mod, Principal: "alice", Limits: kernel.Limits{Timeout: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Pass(context.Background(), root, "once"); err != nil {
			t.Fatal(err)
		}
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		h, _ := p.Task().Lookup(context.Background(), "once")
		_, err = p.Task().Invoke(context.Background(), h, "echo", []byte(`{}`))
		if kernel.ErrnoOf(err) != want {
			t.Errorf("call %d: %v, want %s", i, err, want)
		}
		p.Task().Kill()
	}
	if err := (&kernel.PendingTask{}).Pass(context.Background(), nil, "x"); err == nil {
		t.Error("passing nothing worked")
	}

	session.Kill()
	select {
	case <-session.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the session did not end")
	}
	if c.State() == kernel.TaskRunning {
		t.Error("a child outlived its session")
	}
	if _, err := k.NewChild(session, spec(nil)); err == nil {
		t.Error("a child of an ended session was built")
	}
}
