package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// TestHostChildren: a host's session task floats up with what it was
// shown (Observe, bounded by its clearance); a child the host starts for
// it (StartChild) starts at its label, within its clearance, holds the
// blobs it is given unread, shares the uses of what it was passed, and
// ends when its parent ends.
func TestHostChildren(t *testing.T) {
	k, err := kernel.New(kernel.Config{Engine: kerneltest.WaitEngine{}, Kinds: []kindapi.Kind{kerneltest.New()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mod, _ := kerneltest.WaitEngine{}.Compile(ctx, nil)
	pii := kindapi.NewLabel([]string{"pii:alice"}, nil)
	scope, _ := k.Grant("test", kindapi.GrantContext{}, []byte(`{"level":1,"clearance":[]}`))
	session, err := k.Start(ctx, kernel.TaskSpec{Module: mod, Principal: "alice", Clearance: &pii,
		Limits: kernel.Limits{Timeout: time.Hour}, Grants: []kernel.GrantSpec{{Name: "tool.sink", Kind: "test", Scope: scope}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := session.Observe(kindapi.NewLabel([]string{"pii:bob"}, nil)); kindapi.ErrnoOf(err) != abi.EFLOW || !session.Label().IsZero() {
		t.Fatalf("observing above the clearance: %v, label %v", err, session.Label())
	}
	sink, _ := session.CapByName("tool.sink")
	public := kindapi.Label{}
	spec := func(c *kindapi.Label) kernel.ChildSpec {
		return kernel.ChildSpec{Module: mod, Name: "tool", Clearance: c, Limits: kernel.Limits{Timeout: time.Hour},
			Caps: []kernel.PassedCap{{Name: "sink", Cap: sink}}}
	}
	// Before the session saw anything: a public child is fine, and
	// killing it (its call canceled) ends it.
	c, err := session.StartChild(ctx, spec(&public))
	if err != nil {
		t.Fatal(err)
	}
	c.Kill()
	select {
	case <-c.Done():
	case <-time.After(time.Minute):
		t.Fatal("killing the child did not end it")
	}
	// Once it has seen Alice's data, a child cleared for public data
	// cannot start, and one with the session's clearance starts labelled.
	if err := session.Observe(pii); err != nil {
		t.Fatal(err)
	}
	if _, err := session.StartChild(ctx, spec(&public)); kindapi.ErrnoOf(err) != abi.EFLOW {
		t.Fatalf("a public child of a session that saw PII: %v, want EFLOW", err)
	}
	wide := kindapi.NewLabel([]string{"pii:alice", "pii:bob"}, nil)
	if _, err := session.StartChild(ctx, spec(&wide)); kindapi.ErrnoOf(err) != abi.EFLOW {
		t.Fatalf("a child cleared above its parent: %v, want EFLOW", err)
	}
	s := spec(nil)
	s.Held = []*kindapi.Blob{kindapi.NewBlob([]byte("X1234567"), pii)}
	s.Input = []byte(`{"passport":1}`)
	c, err = session.StartChild(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Label(); len(l.Conf()) != 1 {
		t.Fatalf("the child starts at %v, want its parent's label", l)
	}
	if l, err := c.BlobLabel(kernel.HeldHandle(0)); err != nil || l != pii {
		t.Fatalf("the held blob at HeldHandle(0): %v, %v", l, err)
	}
	// The child's sink is public: its label, from the session, is not.
	sh, err := c.Lookup(ctx, "sink")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Invoke(ctx, sh, "echo", []byte(`{}`)); kindapi.ErrnoOf(err) != abi.EFLOW {
		t.Errorf("the child's call to a public sink: %v, want EFLOW", err)
	}
	// A capability passed from the session shares its uses across
	// children.
	once, _ := k.Grant("test", kindapi.GrantContext{}, []byte(`{"level":1}`))
	s2, err := k.Start(ctx, kernel.TaskSpec{Module: mod, Principal: "alice", Limits: kernel.Limits{Timeout: time.Hour},
		Grants: []kernel.GrantSpec{{Name: "tool.once", Kind: "test", Scope: once, Allowance: kernel.Allowance{MaxUses: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Kill()
	root, _ := s2.CapByName("tool.once")
	for i, want := range []abi.Errno{abi.ESUCCESS, abi.ELIMIT} {
		c, err := s2.StartChild(ctx, kernel.ChildSpec{Module: mod, Limits: kernel.Limits{Timeout: time.Hour},
			Caps: []kernel.PassedCap{{Name: "once", Cap: root}}})
		if err != nil {
			t.Fatal(err)
		}
		h, _ := c.Lookup(ctx, "once")
		_, err = c.Invoke(ctx, h, "echo", []byte(`{}`))
		if kindapi.ErrnoOf(err) != want {
			t.Errorf("call %d: %v, want %s", i, err, want)
		}
		c.Kill()
	}
	// A capability the parent does not hold is not passed.
	if _, err := session.StartChild(ctx, kernel.ChildSpec{Module: mod, Caps: []kernel.PassedCap{{Name: "x", Cap: root}}}); kindapi.ErrnoOf(err) != abi.EBADHANDLE {
		t.Errorf("passing another task's capability: %v, want EBADHANDLE", err)
	}

	session.Kill()
	select {
	case <-session.Done():
	case <-time.After(time.Minute):
		t.Fatal("the session did not end")
	}
	<-c.Done()
	if _, err := session.StartChild(ctx, spec(nil)); kindapi.ErrnoOf(err) != abi.ECHILD {
		t.Errorf("a child of an ended session: %v, want ECHILD", err)
	}
}

// failingAuditor records entries, and fails the ones fail matches.
type failingAuditor struct {
	mu      sync.Mutex
	entries []kernel.AuditEvent
	batches [][]kernel.AuditEvent // what RecordAll committed, each batch whole
	fail    func(kernel.AuditEvent) bool
}

func (a *failingAuditor) Record(_ context.Context, ev kernel.AuditEvent) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail != nil && a.fail(ev) {
		return errors.New("disk full")
	}
	a.entries = append(a.entries, ev)
	return nil
}

// batchingAuditor is a failingAuditor that commits a batch whole or not
// at all (kernel.BatchAuditor), and keeps each batch it committed.
type batchingAuditor struct{ *failingAuditor }

func (a *batchingAuditor) RecordAll(_ context.Context, evs []kernel.AuditEvent) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ev := range evs {
		if a.fail != nil && a.fail(ev) {
			return errors.New("disk full")
		}
	}
	a.entries = append(a.entries, evs...)
	a.batches = append(a.batches, evs)
	return nil
}

func (a *failingAuditor) count(op string, d kernel.Decision) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, ev := range a.entries {
		if ev.Op == op && ev.Decision == d {
			n++
		}
	}
	return n
}

// TestStartChildRefused is the pipeline table's rows for host-started
// children: refused at each step, no child made, nothing minted, every
// reservation given back (the next legitimate start, which needs them
// all, succeeds), the refusal audited and no "allow" for it.
func TestStartChildRefused(t *testing.T) {
	pii := kindapi.NewLabel([]string{"pii:alice"}, nil)
	public := kindapi.Label{}
	rows := []struct {
		step string
		// setup breaks the start; spec is the start refused.
		setup func(e *hostChildEnv) kernel.ChildSpec
		want  abi.Errno
	}{
		{"clearance", func(e *hostChildEnv) kernel.ChildSpec {
			if err := e.session.Observe(pii); err != nil {
				t.Fatal(err)
			}
			s := e.spec()
			s.Clearance = &public
			return s
		}, abi.EFLOW},
		{"held-blob", func(e *hostChildEnv) kernel.ChildSpec {
			s := e.spec()
			s.Clearance = &public
			s.Held = []*kindapi.Blob{kindapi.NewBlob([]byte("X1234567"), pii)}
			return s
		}, abi.EFLOW},
		{"pass", func(e *hostChildEnv) kernel.ChildSpec {
			s := e.spec()
			rev, _ := e.session.CapByName("tool.revoked")
			e.k.Revoke(rev)
			s.Caps = append(s.Caps, kernel.PassedCap{Name: "revoked", Cap: rev})
			return s
		}, abi.EREVOKED},
		{"pass-twice", func(e *hostChildEnv) kernel.ChildSpec {
			s := e.spec()
			s.Caps = append(s.Caps, s.Caps[0])
			return s
		}, abi.EINVAL},
		{"children", func(e *hostChildEnv) kernel.ChildSpec {
			s := e.spec()
			s.MaxChildren = 1
			e.start(t, s) // the one child allowed
			return s
		}, abi.ELIMIT},
		{"tasks", func(e *hostChildEnv) kernel.ChildSpec {
			e.start(t, e.spec()) // the kernel runs 2 tasks at most: the session and this one
			return e.spec()
		}, abi.ELIMIT},
		{"audit", failAudit(func(ev kernel.AuditEvent) bool { return ev.Op == "spawn" && ev.Decision == kernel.Allow }), abi.EINTERNAL},
		{"audit-pass", failAudit(func(ev kernel.AuditEvent) bool { return ev.Op == "pass" }), abi.EINTERNAL},
		{"audit-outcome", failAudit(func(ev kernel.AuditEvent) bool { return ev.Op == "spawn" && ev.Decision == kernel.Outcome }), abi.EINTERNAL},
	}
	// Each row with an auditor that records one event at a time, and with
	// one that commits a spawn's events together (kernel.BatchAuditor).
	for _, batch := range []bool{false, true} {
		for _, r := range rows {
			t.Run(fmt.Sprintf("%s/batch=%v", r.step, batch), func(t *testing.T) {
				// Recorded one at a time, an entry that fails after the
				// allow leaves the allow in the log (and the child
				// unmade); committed together, nothing of the act is.
				allowKept := !batch && strings.HasPrefix(r.step, "audit-")
				testStartChildRefused(t, newHostChildEnv(t, batch), r.setup, r.want, allowKept)
			})
		}
	}
}

// failAudit is a row's setup that makes the audit log fail the entries
// fail matches.
func failAudit(fail func(kernel.AuditEvent) bool) func(e *hostChildEnv) kernel.ChildSpec {
	return func(e *hostChildEnv) kernel.ChildSpec {
		e.audit.mu.Lock()
		e.audit.fail = fail
		e.audit.mu.Unlock()
		return e.spec()
	}
}

// testStartChildRefused is one row of TestStartChildRefused in env e.
func testStartChildRefused(t *testing.T, e *hostChildEnv, setup func(e *hostChildEnv) kernel.ChildSpec, want abi.Errno, allowKept bool) {
	spec := setup(e)
	tasks, caps := len(e.k.Graph().Tasks), len(e.k.Graph().Caps)
	allows := e.audit.count("spawn", kernel.Allow)
	use, _ := e.session.CapByName("tool.sink")
	before, _ := use.Usage()

	_, err := e.session.StartChild(context.Background(), spec)
	if got := kindapi.ErrnoOf(err); got != want {
		t.Fatalf("start: %v (%s), want %s", err, got, want)
	}
	g := e.k.Graph()
	if len(g.Tasks) != tasks {
		t.Errorf("%d tasks after the refusal, want %d: a child was made", len(g.Tasks), tasks)
	}
	if len(g.Caps) != caps {
		t.Errorf("%d capabilities after the refusal, want %d: one was minted", len(g.Caps), caps)
	}
	if allowKept {
		allows++
	}
	if n := e.audit.count("spawn", kernel.Allow); n != allows {
		t.Errorf("%d allow entries for spawn after the refusal, want %d", n, allows)
	}
	// A denial is audited; a malformed request (EINVAL) and a
	// failed audit write are the task's last error.
	if n := e.audit.count("spawn", kernel.Deny); n == 0 && want != abi.EINVAL && want != abi.EINTERNAL {
		t.Error("the refusal was not audited")
	}
	if after, _ := use.Usage(); after != before {
		t.Errorf("the passed capability's usage went from %+v to %+v", before, after)
	}
	// Every reservation was given back: once the step's obstacle
	// is gone, the same start needs the same places and gets them.
	e.clear(t)
	c, err := e.session.StartChild(context.Background(), e.spec())
	if err != nil {
		t.Fatalf("the start after the refusal: %v", err)
	}
	if n := e.audit.count("spawn", kernel.Allow); n != allows+1 {
		t.Errorf("%d allow entries for spawn after a start, want %d", n, allows+1)
	}
	c.Kill()
}

// TestStartChildOneCommit: with a kernel.BatchAuditor, a start's entries
// (the spawn's allow, the capability passed, the spawn's outcome) are one
// commit, in that order, and no Record of their own; without one, the
// same entries, one Record each.
func TestStartChildOneCommit(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			e := newHostChildEnv(t, batch)
			e.audit.mu.Lock()
			n0, b0 := len(e.audit.entries), len(e.audit.batches)
			e.audit.mu.Unlock()
			c, err := e.session.StartChild(context.Background(), e.spec())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Kill()
			e.audit.mu.Lock()
			defer e.audit.mu.Unlock()
			var got []string
			for _, ev := range e.audit.entries[n0:] {
				got = append(got, ev.Op+" "+string(ev.Decision))
			}
			want := []string{"spawn allow", "pass allow", "spawn outcome"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("entries %q, want %q", got, want)
			}
			batches := e.audit.batches[b0:]
			switch {
			case batch && (len(batches) != 1 || len(batches[0]) != 3):
				t.Errorf("%d commits (%v), want the 3 entries in one", len(batches), batches)
			case !batch && len(batches) != 0:
				t.Errorf("%d batches from an auditor without RecordAll", len(batches))
			}
		})
	}
}

// hostChildEnv is a kernel running at most two tasks, with a session
// task holding a capability with uses.
type hostChildEnv struct {
	k       *kernel.Kernel
	audit   *failingAuditor
	session *kernel.Task
	kids    []*kernel.Task
	spec    func() kernel.ChildSpec
}

// newHostChildEnv makes the env; with batch, its auditor is a
// kernel.BatchAuditor.
func newHostChildEnv(t *testing.T, batch bool) *hostChildEnv {
	t.Helper()
	e := &hostChildEnv{audit: &failingAuditor{}}
	var auditor kernel.Auditor = e.audit
	if batch {
		auditor = &batchingAuditor{e.audit}
	}
	var err error
	e.k, err = kernel.New(kernel.Config{Engine: kerneltest.WaitEngine{}, Kinds: []kindapi.Kind{kerneltest.New()}, Auditor: auditor, MaxTasks: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mod, _ := kerneltest.WaitEngine{}.Compile(ctx, nil)
	pii := kindapi.NewLabel([]string{"pii:alice"}, nil)
	scope, _ := e.k.Grant("test", kindapi.GrantContext{}, []byte(`{"level":1,"clearance":["pii:alice"]}`))
	e.session, err = e.k.Start(ctx, kernel.TaskSpec{Module: mod, Principal: "alice", Clearance: &pii, Limits: kernel.Limits{Timeout: time.Hour},
		Grants: []kernel.GrantSpec{
			{Name: "tool.sink", Kind: "test", Scope: scope, Allowance: kernel.Allowance{MaxUses: 5}},
			{Name: "tool.revoked", Kind: "test", Scope: scope},
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.session.Kill)
	sink, _ := e.session.CapByName("tool.sink")
	e.spec = func() kernel.ChildSpec {
		return kernel.ChildSpec{Module: mod, Name: "tool", Limits: kernel.Limits{Timeout: time.Hour}, MaxChildren: 2,
			Caps: []kernel.PassedCap{{Name: "sink", Cap: sink}}}
	}
	return e
}

func (e *hostChildEnv) start(t *testing.T, s kernel.ChildSpec) {
	t.Helper()
	c, err := e.session.StartChild(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	e.kids = append(e.kids, c)
}

// clear ends the children the setup started and lets the audit log
// write again.
func (e *hostChildEnv) clear(t *testing.T) {
	t.Helper()
	for _, c := range e.kids {
		c.Kill()
		<-c.Done()
	}
	e.audit.mu.Lock()
	e.audit.fail = nil
	e.audit.mu.Unlock()
}
