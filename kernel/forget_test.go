package kernel_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// observed records the observer's calls.
type observed struct {
	mu             sync.Mutex
	started, ended []string
	endedCh        chan *kernel.Task
}

func (o *observed) TaskStarted(t *kernel.Task) {
	o.mu.Lock()
	o.started = append(o.started, t.ID())
	o.mu.Unlock()
}

func (o *observed) TaskEnded(t *kernel.Task) {
	o.mu.Lock()
	o.ended = append(o.ended, t.ID())
	o.mu.Unlock()
	if !t.Ended() {
		panic("TaskEnded before the task ended")
	}
	o.endedCh <- t
}

// TestForget: a host forgets the children that ended; the kernel's tasks
// and graph shrink back, what they spent stays spent on the capability
// the session still holds, a revocation still reaches what is left, and a
// running task cannot be forgotten.
func TestForget(t *testing.T) {
	obs := &observed{endedCh: make(chan *kernel.Task, 16)}
	k, err := kernel.New(kernel.Config{Engine: kerneltest.WaitEngine{}, Kinds: []kindapi.Kind{kerneltest.New()}, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	mod, _ := kerneltest.WaitEngine{}.Compile(context.Background(), nil)
	scope, _ := k.Grant("test", kindapi.GrantContext{}, []byte(`{"level":1}`))
	session, err := k.Start(context.Background(), kernel.TaskSpec{Module: mod, Principal: "alice", Limits: kernel.Limits{Timeout: time.Hour},
		Grants: []kernel.GrantSpec{{Name: "sink", Kind: "test", Scope: scope, Allowance: kernel.Allowance{MaxUses: 3}}}})
	if err != nil {
		t.Fatal(err)
	}
	sink, _ := session.CapByName("sink")
	// Two children, each passed the session's capability; each uses it
	// once, then is killed (its call ended) and forgotten.
	for i := range 2 {
		c, err := session.StartChild(context.Background(), kernel.ChildSpec{Module: mod, Limits: kernel.Limits{Timeout: time.Hour},
			Caps: []kernel.PassedCap{{Name: "sink", Cap: sink}}})
		if err != nil {
			t.Fatal(err)
		}
		h, err := c.Lookup(context.Background(), "sink")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Invoke(context.Background(), h, "echo", []byte(`{}`)); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
		if err := k.Forget(c); err == nil {
			t.Fatal("a running task was forgotten")
		}
		c.Kill()
		ended := <-obs.endedCh
		if ended != c {
			t.Fatalf("TaskEnded for %s, want %s", ended.ID(), c.ID())
		}
		if err := k.Forget(c); err != nil {
			t.Fatal(err)
		}
		if err := k.Forget(c); err != nil {
			t.Fatalf("forgetting twice: %v", err)
		}
		g := k.Graph()
		if len(g.Tasks) != 1 || len(g.Caps) != 1 || len(k.Tasks()) != 1 {
			t.Fatalf("after forgetting child %d the kernel keeps %d tasks and %d caps, want the session and its grant", i, len(g.Tasks), len(g.Caps))
		}
		if g.Caps[0].View.Uses != int64(i+1) {
			t.Fatalf("the session's capability shows %d uses after %d children used it once", g.Caps[0].View.Uses, i+1)
		}
	}
	// The third use is the last of three; the fourth is refused: what the
	// forgotten children spent stays spent.
	h, _ := session.Lookup(context.Background(), "sink")
	if _, err := session.Invoke(context.Background(), h, "echo", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := session.Invoke(context.Background(), h, "echo", []byte(`{}`)); kindapi.ErrnoOf(err) != abi.ELIMIT {
		t.Fatalf("a fourth use of a max_uses = 3 capability: %v, want ELIMIT", err)
	}
	obs.mu.Lock()
	if len(obs.started) != 3 || len(obs.ended) != 2 {
		t.Errorf("observer saw %d starts and %d ends, want 3 and 2", len(obs.started), len(obs.ended))
	}
	obs.mu.Unlock()
	if err := k.Forget(session); err == nil {
		t.Fatal("the running session was forgotten")
	}
	session.Kill()
	<-obs.endedCh
	if err := k.Forget(session); err != nil {
		t.Fatal(err)
	}
	if g := k.Graph(); len(g.Tasks) != 0 || len(g.Caps) != 0 {
		t.Fatalf("after forgetting the root: %d tasks, %d caps", len(g.Tasks), len(g.Caps))
	}
}
