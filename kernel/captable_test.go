package kernel

import (
	"errors"
	"sync"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
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
	tb.slots = append(tb.slots, slot{gen: abi.MaxGen})
	tb.free = []uint32{0}
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
