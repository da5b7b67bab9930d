package kernel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox"
)

func TestCapTableStaleHandles(t *testing.T) {
	tb := NewCapTable(4)
	b := kindapi.NewBlob([]byte("x"), kindapi.Label{})
	h, err := tb.InsertBlob(b)
	if err != nil {
		t.Fatal(err)
	}
	if h == 0 {
		t.Fatal("handle 0 handed out")
	}
	if got, err := tb.GetBlob(h); err != nil || got != b {
		t.Fatalf("GetBlob = %v, %v; want the blob", got, err)
	}
	if err := tb.Remove(h); err != nil {
		t.Fatal(err)
	}
	// The slot is reused with a new generation: the old handle is stale.
	h2, _ := tb.InsertBlob(kindapi.NewBlob([]byte("y"), kindapi.Label{}))
	if h2.Index() != h.Index() || h2 == h {
		t.Fatalf("reuse: got %#x after %#x, want same slot, new generation", h2, h)
	}
	if _, err := tb.GetBlob(h); !errors.Is(err, kindapi.ErrBadHandle) {
		t.Fatalf("stale handle: got %v, want ErrBadHandle", err)
	}
	if err := tb.Remove(h); !errors.Is(err, kindapi.ErrBadHandle) {
		t.Fatalf("double remove: got %v, want ErrBadHandle", err)
	}
}

func TestCapTableInventedHandles(t *testing.T) {
	tb := NewCapTable(4)
	h, _ := tb.InsertBlob(kindapi.NewBlob(nil, kindapi.Label{}))
	for _, bad := range []abi.Handle{0, 1, h + 1, h ^ (1 << 20), abi.MakeHandle(4095, 1), 0xffffffff} {
		if _, err := tb.GetBlob(bad); !errors.Is(err, kindapi.ErrBadHandle) {
			t.Errorf("GetBlob(%#x) = %v, want ErrBadHandle", uint32(bad), err)
		}
		if _, err := tb.GetCap(bad); !errors.Is(err, kindapi.ErrBadHandle) {
			t.Errorf("GetCap(%#x) = %v, want ErrBadHandle", uint32(bad), err)
		}
	}
	if _, err := tb.GetCap(h); !errors.Is(err, kindapi.ErrWrongType) {
		t.Errorf("GetCap(blob) = %v, want ErrWrongType", err)
	}
}

func TestCapTableLimit(t *testing.T) {
	tb := NewCapTable(3)
	for i := 0; i < 3; i++ {
		if _, err := tb.InsertBlob(kindapi.NewBlob(nil, kindapi.Label{})); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tb.InsertBlob(kindapi.NewBlob(nil, kindapi.Label{})); !errors.Is(err, kindapi.ErrLimit) {
		t.Fatalf("insert past limit: got %v, want ErrLimit", err)
	}
	if got := NewCapTable(1 << 20).Limit(); got != MaxHandles {
		t.Fatalf("limit clamp: got %d, want %d", got, MaxHandles)
	}
}

func TestCapTableGenerationRetire(t *testing.T) {
	tb := NewCapTable(1)
	// A free slot whose generation is the last.
	idx, err := tb.reserve()
	if err != nil {
		t.Fatal(err)
	}
	tb.cellAt(idx).state.Store(abi.MaxGen << 1)
	tb.unreserve(idx)
	h, _ := tb.InsertBlob(kindapi.NewBlob(nil, kindapi.Label{}))
	if h.Gen() != abi.MaxGen {
		t.Fatalf("gen = %d", h.Gen())
	}
	if err := tb.Remove(h); err != nil {
		t.Fatal(err)
	}
	h2, err := tb.InsertBlob(kindapi.NewBlob(nil, kindapi.Label{}))
	if err != nil {
		t.Fatal(err)
	}
	if h2.Index() == h.Index() {
		t.Fatalf("exhausted slot reused: %#x", h2)
	}
	if _, err := tb.GetBlob(h); !errors.Is(err, kindapi.ErrBadHandle) {
		t.Fatalf("stale handle to retired slot: %v", err)
	}
}

// TestCapTableHammer inserts, reads and removes from many goroutines; run
// with -race. No goroutine may ever see another's entry through its own
// handle.
func TestCapTableHammer(t *testing.T) {
	tb := NewCapTable(MaxHandles)
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				want := kindapi.NewBlob(nil, kindapi.Label{})
				h, err := tb.InsertBlob(want)
				if err != nil {
					t.Error(err)
					return
				}
				got, err := tb.GetBlob(h)
				if err != nil || got != want {
					t.Errorf("own handle %#x gave %v, %v", uint32(h), got, err)
					return
				}
				if err := tb.Remove(h); err != nil {
					t.Error(err)
					return
				}
				if _, err := tb.GetBlob(h); err == nil {
					// The slot may be reused by another goroutine, but
					// never under the same generation.
					t.Errorf("removed handle %#x still resolves", uint32(h))
					return
				}
			}
		}()
	}
	wg.Wait()
	if tb.Len() != 0 {
		t.Fatalf("Len = %d after hammer, want 0", tb.Len())
	}
}

// TestCapTableStaleReaders: readers hold handles to one slot while a
// writer keeps emptying it and filling it again, with a blob, a
// capability or a task in turn. Reads take no lock: a handle must find its
// own entry while it is there and nothing before or after, never the
// slot's next occupant, never a half-filled slot (run with -race).
func TestCapTableStaleReaders(t *testing.T) {
	const n = 30000
	tb := NewCapTable(1)
	// The slot's occupant of generation g is entries[g-1]: a blob, a
	// capability or a task as (g-1)%3 says.
	type occupant struct {
		blob *kindapi.Blob
		cap  *Cap
		task *Task
	}
	entries := make([]occupant, n)
	for i := range entries {
		switch i % 3 {
		case 0:
			entries[i].blob = kindapi.NewBlob(nil, kindapi.Label{})
		case 1:
			entries[i].cap = &Cap{id: "c"}
		default:
			entries[i].task = &Task{id: "t"}
		}
	}
	var gen atomic.Uint32 // the generation last inserted
	done := make(chan struct{})
	var wg sync.WaitGroup
	// check reads handle (0, g) each way: the way of its occupant finds it
	// or nothing, the others find nothing or the wrong type.
	check := func(g uint32) error {
		if g == 0 || g > n {
			return nil
		}
		h, want := abi.MakeHandle(0, g), entries[g-1]
		b, berr := tb.GetBlob(h)
		c, cerr := tb.GetCap(h)
		k, kerr := tb.GetTask(h)
		for _, r := range []struct {
			mine bool
			got  bool // found the entry of h
			err  error
		}{
			{want.blob != nil, berr == nil && b == want.blob, berr},
			{want.cap != nil, cerr == nil && c == want.cap, cerr},
			{want.task != nil, kerr == nil && k == want.task, kerr},
		} {
			switch {
			case r.got:
			case errors.Is(r.err, kindapi.ErrBadHandle):
			case !r.mine && errors.Is(r.err, kindapi.ErrWrongType):
			default:
				return fmt.Errorf("handle %#x (occupant %d): blob %p %v, cap %p %v, task %p %v; want its own entry or nothing",
					uint32(h), g, b, berr, c, cerr, k, kerr)
			}
		}
		return nil
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				g := gen.Load()
				// The current occupant (or the one just removed), and
				// the next, as a forged handle would guess it.
				for _, g := range []uint32{g, g + 1} {
					if err := check(g); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	for i := range n {
		var h abi.Handle
		var err error
		switch e := entries[i]; {
		case e.blob != nil:
			h, err = tb.InsertBlob(e.blob)
		case e.cap != nil:
			h, err = tb.InsertCap(e.cap)
		default:
			h, err = tb.InsertTask(e.task)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h != abi.MakeHandle(0, uint32(i+1)) {
			t.Fatalf("insert %d: handle %#x", i, uint32(h))
		}
		gen.Store(uint32(i + 1))
		if err := tb.Remove(h); err != nil {
			t.Fatal(err)
		}
		// Removed: from now on no read finds it.
		if _, err := tb.GetBlob(h); !errors.Is(err, kindapi.ErrBadHandle) {
			t.Fatalf("removed handle %#x: %v", uint32(h), err)
		}
	}
	close(done)
	wg.Wait()
}

// gateKind's "wait" operation blocks in its effect until told to go on;
// "noop" does nothing.
type gateKind struct {
	entered chan struct{}
	release chan struct{}
}

func (gateKind) Name() string       { return "gate" }
func (gateKind) Info() kindapi.Info { return kindapi.Info{Ops: []string{"noop", "wait"}} }
func (gateKind) Grant(kindapi.GrantContext, []byte) (kindapi.Scope, error) {
	return nopScope{}, nil
}
func (gateKind) Narrow(kindapi.Scope, []byte) (kindapi.Scope, error) { return nopScope{}, nil }
func (gateKind) Describe(kindapi.Scope) kindapi.Description          { return kindapi.Description{} }
func (g gateKind) Prepare(c *kindapi.Call) (kindapi.Op, error) {
	op := kindapi.Op{NoResult: true}
	if c.Op == "wait" {
		op.Effect = func(context.Context) (*kindapi.Result, error) {
			g.entered <- struct{}{}
			<-g.release
			return nil, nil
		}
	}
	return op, nil
}

// TestCallAfterRevokeOrRemove: a capability revoked, or a handle removed,
// while its task is inside a call on it: the task's very next call fails
// (EREVOKED, EBADHANDLE), ordered by events, not by time. The table's
// lock-free read must not see the entry as it was before the change.
func TestCallAfterRevokeOrRemove(t *testing.T) {
	for _, tc := range []struct {
		name string
		want abi.Errno
		act  func(k *Kernel, task *Task, c *Cap, h abi.Handle) error
	}{
		{"revoke", abi.EREVOKED, func(k *Kernel, _ *Task, c *Cap, _ abi.Handle) error {
			if n := k.Revoke(c); n != 1 {
				return fmt.Errorf("Revoke revoked %d, want 1", n)
			}
			return nil
		}},
		{"remove", abi.EBADHANDLE, func(_ *Kernel, task *Task, _ *Cap, h abi.Handle) error {
			return task.table.Remove(h)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gateKind{entered: make(chan struct{}), release: make(chan struct{})}
			k, err := New(Config{Engine: nullEngine{}, Kinds: []kindapi.Kind{g}})
			if err != nil {
				t.Fatal(err)
			}
			task := &Task{
				k: k, id: "t1", principal: "p", module: "m",
				table: NewCapTable(16), names: map[string]*Cap{},
				logger: hclog.NewNullLogger(), state: TaskRunning, done: make(chan struct{}),
			}
			task.resolveBlob = task.table.GetBlob
			c, err := k.newCap(k.kinds["gate"], nopScope{}, "g", nil, task, false, Constraints{})
			if err != nil {
				t.Fatal(err)
			}
			h, err := task.table.InsertCap(c)
			if err != nil {
				t.Fatal(err)
			}
			var call sandbox.HostFunc
			for _, f := range k.hostFuncs() {
				if f.Name == abi.CapCallName {
					call = f
				}
			}
			mem := &fakeMemory{b: make([]byte, 1<<10)}
			copy(mem.b[100:], "wait")
			copy(mem.b[200:], "noop")
			results := make(chan abi.Errno)
			go func() {
				ctx := withTask(context.Background(), task)
				for _, op := range []uint64{100, 200} {
					stack := []uint64{uint64(h), op, 4, 0, 0, 300}
					call.Fn(ctx, mem, stack)
					results <- abi.Errno(stack[0])
				}
			}()
			<-g.entered // the task is inside its call
			if err := tc.act(k, task, c, h); err != nil {
				t.Fatal(err)
			}
			close(g.release)
			if e := <-results; e != abi.ESUCCESS {
				t.Fatalf("the call in progress: %v, want ESUCCESS (it was decided before)", e)
			}
			if e := <-results; e != tc.want {
				t.Fatalf("the next call: %v, want %v", e, tc.want)
			}
		})
	}
}
