package approvals

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// request is a charge whose body is larger than any terminal shows.
func request() kernel.ApprovalRequest {
	big := strings.Repeat("x", 1<<20) + "<script>alert(1)</script>\x1b[31m"
	return kernel.ApprovalRequest{Task: "t1", Principal: "alice", Cap: "c1", CapName: "card", Kind: "pay", Op: "charge",
		Summary: "charge 612.00 USD to airline.example",
		Details: []kindapi.Detail{{Name: "amount", Value: "612.00 USD"}, {Name: "body", Value: big}},
		Reasons: []string{"amount above approve_above 500.00 USD"}, Digest: "sha256:abcd"}
}

func add(t *testing.T, s *Store, expires time.Duration) Approval {
	t.Helper()
	a, err := s.Add(context.Background(), Approval{Run: "20261129T153000Z-ab12cd", Waiter: "test", Request: request(),
		Expires: time.Now().Add(expires)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAddGetList(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	if _, err := s.Add(ctx, Approval{Request: request()}); err == nil {
		t.Error("Add without Expires: no error")
	}
	a := add(t, s, time.Hour)
	b := add(t, s, time.Hour)
	if !ValidID(a.ID) || a.ID == b.ID || a.State != StatePending || a.PID != os.Getpid() || a.Created.IsZero() {
		t.Fatalf("added: %+v", a)
	}
	got, err := s.Get(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Request.Details[1].Value != request().Details[1].Value || got.Waiter != "test" || got.State != StatePending {
		t.Errorf("Get: the request is not whole, or %+v", got.Request.Summary)
	}
	if _, err := s.Get(ctx, "0123456789abcdef"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of an unknown id: %v, want ErrNotFound", err)
	}
	for _, bad := range []string{"", "../../etc/passwd", "ABCDEF0123456789", strings.Repeat("a", 1000)} {
		if _, err := s.Get(ctx, bad); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%.20q): %v, want ErrNotFound", bad, err)
		}
	}
	if _, err := s.Answer(ctx, b.ID, kernel.Answer{Channel: kernel.ChannelCLI, By: "bob"}, ""); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		o    ListOptions
		want []string
	}{
		{ListOptions{}, []string{b.ID, a.ID}},
		{ListOptions{Pending: true}, []string{a.ID}},
		{ListOptions{Limit: 1}, []string{b.ID}},
		{ListOptions{Run: "20261129T153000Z-ab12cd"}, []string{b.ID, a.ID}},
		{ListOptions{Run: "other"}, nil},
	} {
		l, err := s.List(ctx, c.o)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, x := range l {
			ids = append(ids, x.ID)
		}
		if strings.Join(ids, ",") != strings.Join(c.want, ",") {
			t.Errorf("List(%+v): got %v, want %v", c.o, ids, c.want)
		}
	}
	if n, err := s.Nonce(ctx, a.ID); err != nil || len(n) != 64 {
		t.Errorf("Nonce: %q, %v", n, err)
	}
	if _, err := s.Nonce(ctx, b.ID); !errors.Is(err, ErrNotPending) {
		t.Errorf("Nonce of an answered approval: %v", err)
	}
}

func TestAnswerOnce(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	a := add(t, s, time.Hour)
	got, err := s.Answer(ctx, a.ID, kernel.Answer{Yes: true, Channel: kernel.ChannelCLI, By: "alice on /dev/pts/1"}, "")
	if err != nil || got.State != StateApproved || got.By != "alice on /dev/pts/1" {
		t.Fatalf("answer: %+v, %v", got, err)
	}
	_, err = s.Answer(ctx, a.ID, kernel.Answer{Channel: kernel.ChannelCLI, By: "mallory"}, "")
	if !errors.Is(err, ErrNotPending) || !strings.Contains(err.Error(), "alice on /dev/pts/1") {
		t.Errorf("a second answer: %v, want ErrNotPending naming who answered", err)
	}
	if g, _ := s.Get(ctx, a.ID); g.State != StateApproved || g.Channel != kernel.ChannelCLI {
		t.Errorf("after a second answer: %+v", g)
	}
	if _, err := s.Answer(ctx, "0123456789abcdef", kernel.Answer{Channel: kernel.ChannelCLI}, ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("answering an unknown id: %v", err)
	}
}

func TestWebNonce(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	a := add(t, s, time.Hour)
	nonce, err := s.Nonce(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	web := kernel.Answer{Yes: true, Channel: kernel.ChannelWeb, By: "web page"}
	for _, bad := range []string{"", "00", strings.Repeat("0", 64), nonce[:63]} {
		if _, err := s.Answer(ctx, a.ID, web, bad); !errors.Is(err, ErrNonce) {
			t.Errorf("nonce %q: %v, want ErrNonce", bad, err)
		}
	}
	if g, _ := s.Get(ctx, a.ID); g.State != StatePending {
		t.Fatalf("a wrong nonce changed the approval: %+v", g)
	}
	if _, err := s.Answer(ctx, a.ID, web, nonce); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Answer(ctx, a.ID, web, nonce); err == nil {
		t.Error("a reused nonce answered again")
	}
	// A nonce is the approval's own: another's does not answer it.
	b := add(t, s, time.Hour)
	if _, err := s.Answer(ctx, b.ID, web, nonce); !errors.Is(err, ErrNonce) {
		t.Errorf("another approval's nonce: %v, want ErrNonce", err)
	}
}

func TestExpiry(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	ap := &Approver{Store: s, Waiter: "test", Timeout: 300 * time.Millisecond}
	ans, err := ap.Approve(ctx, request())
	if err != nil {
		t.Fatal(err)
	}
	if ans.Yes || ans.Channel != kernel.ChannelTimeout || ans.By != "nobody answered in 300ms" {
		t.Errorf("expired: %+v", ans)
	}
	l, _ := s.List(ctx, ListOptions{})
	if len(l) != 1 || l[0].State != StateExpired {
		t.Fatalf("listed: %+v", l)
	}
	if _, err := open(t, dir).Answer(ctx, l[0].ID, kernel.Answer{Yes: true, Channel: kernel.ChannelCLI}, ""); !errors.Is(err, ErrNotPending) ||
		!strings.Contains(err.Error(), "expired") {
		t.Errorf("answering an expired approval: %v", err)
	}
	// One expired without a waiter is expired when read, and answering it
	// records so.
	b := add(t, s, -time.Second)
	if g, _ := s.Get(ctx, b.ID); g.State != StateExpired || g.Channel != kernel.ChannelTimeout {
		t.Errorf("read past its expiry: %+v", g)
	}
	if _, err := s.Answer(ctx, b.ID, kernel.Answer{Yes: true, Channel: kernel.ChannelCLI}, ""); !errors.Is(err, ErrNotPending) {
		t.Errorf("answering it: %v", err)
	}
}

// TestApproverAnsweredElsewhere: the approval is answered through another
// Store on the same directory, as mandate approvals or mandate ui would.
func TestApproverAnsweredElsewhere(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	for _, yes := range []bool{true, false} {
		asked := make(chan Approval, 1)
		ap := &Approver{Store: s, Run: "r1", Waiter: "test", Asked: func(_ context.Context, a Approval) { asked <- a }}
		type result struct {
			a   kernel.Answer
			err error
		}
		done := make(chan result, 1)
		go func() {
			a, err := ap.Approve(context.Background(), request())
			done <- result{a, err}
		}()
		a := <-asked
		if a.Run != "r1" || a.State != StatePending {
			t.Errorf("asked: %+v", a)
		}
		other := open(t, dir)
		if _, err := other.Answer(context.Background(), a.ID, kernel.Answer{Yes: yes, Channel: kernel.ChannelCLI, By: "alice"}, ""); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.err != nil || r.a != (kernel.Answer{Yes: yes, Channel: kernel.ChannelCLI, By: "alice"}) {
			t.Errorf("yes=%v: %+v, %v", yes, r.a, r.err)
		}
	}
}

func TestApproverCanceled(t *testing.T) {
	s := open(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	var id string
	ap := &Approver{Store: s, Waiter: "test", Asked: func(_ context.Context, a Approval) { id = a.ID; cancel() }}
	if _, err := ap.Approve(ctx, request()); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
	g, err := s.Get(context.Background(), id)
	if err != nil || g.State != StateWithdrawn || !strings.Contains(g.Note, "ended") {
		t.Errorf("after cancel: %+v, %v", g, err)
	}
	if _, err := s.Answer(context.Background(), id, kernel.Answer{Yes: true, Channel: kernel.ChannelCLI}, ""); !errors.Is(err, ErrNotPending) {
		t.Errorf("answering a withdrawn approval: %v", err)
	}
}

// TestWaiterGone: an approval whose waiting process ended reads as
// withdrawn and cannot be answered.
func TestWaiterGone(t *testing.T) {
	ctx := context.Background()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	s := open(t, t.TempDir())
	a, err := s.Add(ctx, Approval{Waiter: "gone", PID: cmd.Process.Pid, Request: request(), Expires: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Get(ctx, a.ID); g.State != StateWithdrawn || g.Note != NoteWaiterEnded {
		t.Errorf("read: %+v", g)
	}
	if l, _ := s.List(ctx, ListOptions{Pending: true}); len(l) != 0 {
		t.Errorf("listed as pending: %+v", l)
	}
	if _, err := s.Answer(ctx, a.ID, kernel.Answer{Yes: true, Channel: kernel.ChannelCLI}, ""); !errors.Is(err, ErrNotPending) {
		t.Errorf("answered: %v", err)
	}
}

// TestAnswerRace: answers from several stores at once: exactly one wins.
func TestAnswerRace(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	a := add(t, s, time.Hour)
	nonce, _ := s.Nonce(context.Background(), a.ID)
	const n = 12
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for i := range n {
		st := s
		if i%2 == 1 {
			st = open(t, dir)
		}
		wg.Go(func() {
			ans := kernel.Answer{Yes: i%3 == 0, Channel: kernel.ChannelCLI, By: "racer"}
			if i%4 == 0 {
				ans.Channel = kernel.ChannelWeb
			}
			_, err := st.Answer(context.Background(), a.ID, ans, nonce)
			if err == nil {
				mu.Lock()
				won++
				mu.Unlock()
			} else if !errors.Is(err, ErrNotPending) {
				t.Errorf("racer %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if won != 1 {
		t.Errorf("%d answers won, want 1", won)
	}
}

func TestCorrupted(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(strings.Repeat("not a database ", 500)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "approvals store") {
		t.Errorf("a corrupted file: %v", err)
	}
}
