package mcpclients

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mandatevm/mandate/kernel/kindapi"
)

// TestStore: a client's label only rises (the join of every raise), is
// another client's own, falls by a reset or after label_ttl, and each
// change is in the history.
func TestStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pii := kindapi.NewLabel([]string{"pii:alice"}, nil)
	web := kindapi.NewLabel(nil, []string{"web"})
	if got, err := st.Label(ctx, "a"); err != nil || !got.Label.IsZero() || !got.Raised.IsZero() {
		t.Fatalf("a new client: %+v %v, want unlabelled", got, err)
	}
	past := time.Now().Add(-time.Hour)
	if _, err := st.Raise(ctx, "a", Raise{Time: past, Run: "r1", Tool: "my_benefits", Label: pii}); err != nil {
		t.Fatal(err)
	}
	after, err := st.Raise(ctx, "a", Raise{Time: past, Run: "r1", Tool: "web_search", Label: web})
	if err != nil {
		t.Fatal(err)
	}
	if want := pii.Join(web); after.String() != want.String() {
		t.Errorf("after two raises: %v, want %v", after, want)
	}
	// Showing less lowers nothing.
	if after, _ := st.Raise(ctx, "a", Raise{Time: past, Label: kindapi.Label{}}); after.String() != pii.Join(web).String() {
		t.Errorf("a raise by nothing: %v", after)
	}
	if got, _ := st.Label(ctx, "b"); !got.Label.IsZero() {
		t.Errorf("client b: %v, want unlabelled", got.Label)
	}
	// A ttl longer than the time since: kept; shorter: dropped.
	if d, err := st.Expire(ctx, "a", 2*time.Hour, time.Now()); err != nil || !d.IsZero() {
		t.Errorf("expire within the ttl: %v %v", d, err)
	}
	if d, err := st.Expire(ctx, "a", time.Minute, time.Now()); err != nil || d.String() != pii.Join(web).String() {
		t.Errorf("expire past the ttl dropped %v (%v)", d, err)
	}
	if got, _ := st.Label(ctx, "a"); !got.Label.IsZero() {
		t.Errorf("after the expiry: %v", got.Label)
	}
	st.Raise(ctx, "a", Raise{Run: "r2", Tool: "my_benefits", Label: pii})
	if d, err := st.Reset(ctx, "a", "ann (uid 1000, /dev/pts/3)", "new task"); err != nil || d.String() != pii.String() {
		t.Errorf("reset dropped %v (%v)", d, err)
	}
	if _, err := st.Reset(ctx, "a", "", "x"); err == nil {
		t.Errorf("a reset by no one was recorded")
	}
	h, err := st.History(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	for _, e := range h {
		events = append(events, e.Event+":"+e.Label.String())
	}
	want := []string{"raise:" + pii.String(), "raise:" + web.String(), "expiry:" + pii.Join(web).String(), "raise:" + pii.String(), "reset:" + pii.String()}
	if len(events) != len(want) {
		t.Fatalf("history %q, want %q", events, want)
	}
	for i := range want {
		if events[i] != want[i] {
			t.Errorf("history[%d] = %q, want %q", i, events[i], want[i])
		}
	}
	if h[4].By != "ann (uid 1000, /dev/pts/3)" || h[4].Why != "new task" || h[0].Run != "r1" || h[0].Tool != "my_benefits" {
		t.Errorf("history entries: %+v", h)
	}
}

// TestStoreRaiseHammer: raises from several openers at once (as several
// processes on one state directory) all land: the label is the join of
// every one.
func TestStoreRaiseHammer(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var stores []*Store
	for range 3 {
		st, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		stores = append(stores, st)
	}
	var wg sync.WaitGroup
	want := kindapi.Label{}
	for i := range 12 {
		l := kindapi.NewLabel([]string{"pii:" + string(rune('a'+i))}, nil)
		want = want.Join(l)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := stores[i%3].Raise(ctx, "c", Raise{Label: l}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got, _ := stores[0].Label(ctx, "c"); got.Label.String() != want.String() {
		t.Errorf("after 12 concurrent raises: %v, want %v", got.Label, want)
	}
}

// TestStoreLabelSeesOtherStores: a store reads the label another store on
// the same directory (another process) raised, each time it is read (a
// session takes it up before every call).
func TestStoreLabelSeesOtherStores(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	want := kindapi.Label{}
	for _, tag := range []string{"pii:alice", "pii:bob", "secret"} {
		if got, err := b.Label(ctx, "c"); err != nil || got.Label.String() != want.String() {
			t.Fatalf("before the raise by %s: %v %v, want %v", tag, got.Label, err, want)
		}
		l := kindapi.NewLabel([]string{tag}, nil)
		if _, err := a.Raise(ctx, "c", Raise{Run: "r", Tool: "t", Label: l}); err != nil {
			t.Fatal(err)
		}
		want = want.Join(l)
		if got, err := b.Label(ctx, "c"); err != nil || got.Label.String() != want.String() {
			t.Fatalf("after the raise by %s in another store: %v %v, want %v", tag, got.Label, err, want)
		}
	}
}

// BenchmarkLabel is a session's read of its client's label, before
// every call.
func BenchmarkLabel(b *testing.B) {
	ctx := context.Background()
	st, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Raise(ctx, "c", Raise{Run: "r", Tool: "t", Label: kindapi.NewLabel([]string{"pii:alice"}, nil)}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := st.Label(ctx, "c"); err != nil {
			b.Fatal(err)
		}
	}
}
