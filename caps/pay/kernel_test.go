package pay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/caps/pay"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Uses, budgets and approvals are the kernel's (kernel/allowance.go,
// kernel/approve.go): the tests in this file run charges through a kernel.
// A kenv is a kernel with the pay kind and one task whose module only
// waits; the test makes that task's calls from Go through Task.Invoke and
// Task.DeriveHandle, where a guest's cap_call and cap_derive arrive once
// their arguments are out of its memory, so each call goes through the
// whole pipeline: reserve (uses and budget on every ancestor), approval,
// the effect, then commit or release. TestGuestHostile runs a real guest.

// kenv is an env (provider, clock, kind) registered with a kernel, and a
// running task holding the grants.
type kenv struct {
	*env
	t    *testing.T
	k    *kernel.Kernel
	task *kernel.Task
	logs *kerneltest.Buffer

	mu     sync.Mutex
	answer func(kernel.ApprovalRequest) (bool, error) // nil: no
	asked  []kernel.ApprovalRequest
	known  map[*kernel.Cap]bool
}

// kgrant is a root grant of a kenv: extra is appended to env.spec, or
// spec replaces it whole (a function of the provider's URL); budget (""
// for none, in the scope's currency) and maxUses are the kernel's
// allowance on it (GrantSpec.Allowance).
type kgrant struct {
	name, extra string
	spec        func(providerURL string) string
	budget      string
	maxUses     int64
}

// kcap is a capability the task holds: its handle, and the kernel's node
// (for Usage).
type kcap struct {
	h abi.Handle
	c *kernel.Cap
}

func newKenv(t *testing.T, grants ...kgrant) *kenv {
	t.Helper()
	e := &kenv{env: newEnv(t, ""), t: t, logs: &kerneltest.Buffer{}, known: map[*kernel.Cap]bool{}}
	logger := hclog.New(&hclog.LoggerOptions{Output: e.logs, Level: hclog.Trace})
	k, err := kernel.New(kernel.Config{Engine: kerneltest.WaitEngine{}, Kinds: []kindapi.Kind{e.env.k}, Logger: logger,
		Approver: kernel.ApproverFunc(func(_ context.Context, r kernel.ApprovalRequest) (bool, error) {
			e.mu.Lock()
			e.asked = append(e.asked, r)
			answer := e.answer
			e.mu.Unlock()
			if answer == nil {
				return false, nil
			}
			return answer(r)
		})})
	if err != nil {
		t.Fatal(err)
	}
	e.k = k
	var specs []kernel.GrantSpec
	for _, g := range grants {
		spec := e.spec(g.extra)
		if g.spec != nil {
			spec = g.spec(e.p.URL)
		}
		s, err := k.Grant("pay", testGC, []byte(spec))
		if err != nil {
			t.Fatalf("grant %s: %v", g.name, err)
		}
		a := kernel.Allowance{MaxUses: g.maxUses}
		if g.budget != "" {
			if a.Budget, err = k.ParseBudget("pay", s, g.budget); err != nil {
				t.Fatalf("budget %q: %v", g.budget, err)
			}
		}
		specs = append(specs, kernel.GrantSpec{Name: g.name, Kind: "pay", Scope: s, Allowance: a})
	}
	mod, _ := kerneltest.WaitEngine{}.Compile(context.Background(), nil)
	task, err := k.Start(context.Background(), kernel.TaskSpec{Module: mod, Principal: "alice", Grants: specs,
		Limits: kernel.Limits{MaxHandles: 4096, Timeout: 10 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	e.task = task
	t.Cleanup(func() {
		task.Kill()
		<-task.Done()
		if strings.Contains(e.logs.String(), testInstrument) {
			t.Errorf("the instrument appears in the kernel's logs")
		}
	})
	for _, c := range task.Caps() {
		e.known[c] = true
	}
	return e
}

// root returns the task's root grant name.
func (e *kenv) root(name string) kcap {
	e.t.Helper()
	h, err := e.task.Lookup(context.Background(), name)
	if err != nil {
		e.t.Fatalf("lookup %s: %v", name, err)
	}
	c, ok := e.task.CapByName(name)
	if !ok {
		e.t.Fatalf("no cap %s", name)
	}
	return kcap{h: h, c: c}
}

// derive asks the kernel for a capability within parent, as cap_derive.
func (e *kenv) derive(parent kcap, req string) (kcap, error) {
	h, err := e.task.DeriveHandle(context.Background(), parent.h, []byte(req))
	if err != nil {
		return kcap{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.task.Caps() {
		if !e.known[c] {
			e.known[c] = true
			if c.Parent() != parent.c {
				e.t.Fatalf("derive %s: the new capability's parent is %v, not %s", req, c.Parent(), parent.c.ID())
			}
			return kcap{h: h, c: c}, nil
		}
	}
	e.t.Fatalf("derive %s: no new capability in the table", req)
	return kcap{}, nil
}

func (e *kenv) mustDerive(parent kcap, req string) kcap {
	e.t.Helper()
	c, err := e.derive(parent, req)
	if err != nil {
		e.t.Fatalf("derive %s: %v", req, err)
	}
	if !parent.c.Scope().Contains(c.c.Scope()) {
		e.t.Fatalf("derive %s: the parent does not contain the child", req)
	}
	return c
}

// charge calls "charge" on c, as cap_call, and returns the receipt.
func (e *kenv) charge(c kcap, args string) ([]byte, error) {
	ctx := context.Background()
	h, err := e.task.Invoke(ctx, c.h, "charge", []byte(args))
	if err != nil {
		return nil, err
	}
	defer e.task.Drop(ctx, h)
	n, err := e.task.BlobLen(ctx, h)
	if err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if _, err := e.task.ReadBlob(ctx, h, 0, b); err != nil {
		return nil, err
	}
	return b, nil
}

// usage is what c's subtree used against c's own max_uses and budget.
func (e *kenv) usage(c kcap) kernel.Usage {
	u, _ := c.c.Usage()
	return u
}

func (e *kenv) wantUsage(what string, c kcap, spent, uses int64) {
	e.t.Helper()
	if u := e.usage(c); u.Spent != spent || u.Uses != uses {
		e.t.Errorf("%s: %s used %d in %d uses, want %d in %d", what, c.c.ID(), u.Spent, u.Uses, spent, uses)
	}
}

// approve sets the approver's answer (nil: no) and forgets who was asked.
func (e *kenv) approve(answer func(kernel.ApprovalRequest) (bool, error)) {
	e.mu.Lock()
	e.answer, e.asked = answer, nil
	e.mu.Unlock()
}

func (e *kenv) approvals() []kernel.ApprovalRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.asked)
}

// TestKernelChargeDebits: a charge uses one of max_uses and its amount of
// the budget; a replay of it uses nothing; a different charge under its
// key is refused by the effect and counts nothing.
func TestKernelChargeDebits(t *testing.T) {
	e := newKenv(t, kgrant{name: "card", budget: "1000", maxUses: 5})
	card := e.root("card")
	if u := e.usage(card); u.Budget != 100000 || u.MaxUses != 5 {
		t.Fatalf("allowance %+v", u)
	}
	first, err := e.charge(card, chargeArgs("Airline.Example", "612.00", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	e.wantUsage("a charge", card, 61200, 1)
	again, err := e.charge(card, chargeArgs("airline.example", "612", "k1"))
	if err != nil || string(again) != string(first) {
		t.Fatalf("replay: %s, %v", again, err)
	}
	e.wantUsage("a replay", card, 61200, 1)
	for _, args := range []string{chargeArgs("airline.example", "613.00", "k1"), chargeArgs("hotel.example", "612.00", "k1")} {
		_, err := e.charge(card, args)
		wantErrno(t, "reused key, different charge", err, abi.EDENIED)
	}
	e.wantUsage("refused reuses of a key", card, 61200, 1)
	if n := len(e.p.Charges()); n != 1 || e.p.Requests() != 1 {
		t.Errorf("provider: %d charges, %d requests; want 1, 1", n, e.p.Requests())
	}
}

// TestKernelRefusedChargesDoNotDebit: what the kind refuses reaches
// neither the provider nor the capability's uses and budget.
func TestKernelRefusedChargesDoNotDebit(t *testing.T) {
	e := newKenv(t, kgrant{name: "card", budget: "1000", maxUses: 5})
	card := e.root("card")
	for _, tc := range chargeRefusals {
		_, err := e.charge(card, tc.args)
		wantErrno(t, tc.name, err, tc.want)
	}
	if n := e.p.Requests(); n != 0 {
		t.Errorf("the provider received %d requests; every charge was refused", n)
	}
	e.wantUsage("refused charges", card, 0, 0)
	if _, err := e.charge(card, chargeArgs("airline.example", "800", "max")); err != nil {
		t.Errorf("charge of max_amount: %v", err)
	}
	e.wantUsage("one charge", card, 80000, 1)
}

func TestKernelBudgetAndUses(t *testing.T) {
	e := newKenv(t, kgrant{name: "card", budget: "100.00 USD", maxUses: 3})
	card := e.root("card")
	for i, amt := range []string{"60", "40.00"} {
		if _, err := e.charge(card, chargeArgs("airline.example", amt, fmt.Sprint("k", i))); err != nil {
			t.Fatalf("charge %s: %v", amt, err)
		}
	}
	_, err := e.charge(card, chargeArgs("airline.example", "0.01", "k2"))
	wantErrno(t, "over budget", err, abi.ELIMIT)
	e.wantUsage("budget spent", card, 10000, 2)
	if n := e.p.Requests(); n != 2 {
		t.Errorf("provider received %d requests, want 2", n)
	}

	u := newKenv(t, kgrant{name: "card", maxUses: 2})
	ucard := u.root("card")
	for i := range 2 {
		if _, err := u.charge(ucard, chargeArgs("airline.example", "1", fmt.Sprint("k", i))); err != nil {
			t.Fatal(err)
		}
	}
	_, err = u.charge(ucard, chargeArgs("airline.example", "1", "k9"))
	wantErrno(t, "over max_uses", err, abi.ELIMIT)
	// A replay is not a use.
	if _, err := u.charge(ucard, chargeArgs("airline.example", "1", "k0")); err != nil {
		t.Errorf("replay after max_uses: %v", err)
	}
	if n := len(u.p.Charges()); n != 2 {
		t.Errorf("provider has %d charges, want 2", n)
	}
	u.wantUsage("uses spent", ucard, 200, 2)
}

// TestKernelIdempotencyConcurrent: one key charged at once through many
// derived capabilities is one charge at the provider, and every caller
// that gets a receipt gets that one.
func TestKernelIdempotencyConcurrent(t *testing.T) {
	e := newKenv(t, kgrant{name: "card", budget: "100"})
	card := e.root("card")
	children := make([]kcap, 8)
	for i := range children {
		children[i] = e.mustDerive(card, `{}`)
	}
	var wg sync.WaitGroup
	receipts := make([][]byte, 40)
	errs := make([]error, 40)
	for i := range receipts {
		wg.Go(func() {
			receipts[i], errs[i] = e.charge(children[i%len(children)], chargeArgs("airline.example", "10", "same"))
		})
	}
	wg.Wait()
	if n := len(e.p.Charges()); n != 1 || e.p.Requests() != 1 {
		t.Errorf("provider: %d charges, %d requests; want exactly one", n, e.p.Requests())
	}
	var first []byte
	for i := range receipts {
		if errs[i] != nil {
			t.Errorf("charge %d: %v", i, errs[i])
			continue
		}
		if first == nil {
			first = receipts[i]
		}
		if string(receipts[i]) != string(first) {
			t.Errorf("receipt %d differs: %s vs %s", i, receipts[i], first)
		}
	}
	// One charge was made: the budget holds its amount only.
	e.wantUsage("one charge, replayed", card, 1000, 1)
}

func TestKernelBudgetRaceChildren(t *testing.T) {
	e := newKenv(t, kgrant{name: "card", budget: "100.00"})
	card := e.root("card")
	children := make([]kcap, 10)
	for i := range children {
		children[i] = e.mustDerive(card, `{"budget":"50"}`)
	}
	var ok, limited atomic.Int64
	var wg sync.WaitGroup
	for i, c := range children {
		wg.Go(func() {
			_, err := e.charge(c, chargeArgs("airline.example", "15.00", fmt.Sprint("c", i)))
			switch kindapi.ErrnoOf(err) {
			case abi.ESUCCESS:
				ok.Add(1)
			case abi.ELIMIT:
				limited.Add(1)
			default:
				t.Errorf("child %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 6 || limited.Load() != 4 {
		t.Errorf("%d charges succeeded, %d hit the budget; want 6 and 4", ok.Load(), limited.Load())
	}
	if total := e.p.Total(); total != 9000 || len(e.p.Charges()) != 6 {
		t.Errorf("provider total %d in %d charges, want 9000 in 6", total, len(e.p.Charges()))
	}
	e.wantUsage("root", card, 9000, 6)
}

func TestKernelBudgetRaceOneCap(t *testing.T) {
	e := newKenv(t, kgrant{name: "card", budget: "30.00", maxUses: 40})
	card := e.root("card")
	var ok atomic.Int64
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			_, err := e.charge(card, chargeArgs("hotel.example", "1.00", fmt.Sprint("g", i)))
			if err == nil {
				ok.Add(1)
			} else if kindapi.ErrnoOf(err) != abi.ELIMIT {
				t.Errorf("goroutine %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 30 || e.p.Total() != 3000 || len(e.p.Charges()) != 30 {
		t.Errorf("%d succeeded, provider total %d in %d charges; want 30, 3000, 30", ok.Load(), e.p.Total(), len(e.p.Charges()))
	}
	e.wantUsage("root", card, 3000, 30)
	// Uses race the same way, through 50 children.
	u := newKenv(t, kgrant{name: "card", maxUses: 7})
	ucard := u.root("card")
	ok.Store(0)
	for i := range 50 {
		c := u.mustDerive(ucard, `{}`)
		wg.Go(func() {
			if _, err := u.charge(c, chargeArgs("hotel.example", "1.00", fmt.Sprint("g", i))); err == nil {
				ok.Add(1)
			} else if kindapi.ErrnoOf(err) != abi.ELIMIT {
				t.Errorf("goroutine %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 7 || len(u.p.Charges()) != 7 {
		t.Errorf("%d succeeded, %d at the provider; want 7", ok.Load(), len(u.p.Charges()))
	}
	u.wantUsage("root", ucard, 700, 7)
}

// TestKernelProviderRefusalReleases: a charge the provider refuses
// (kindapi.NotPerformed) gives back the use and the budget it reserved.
func TestKernelProviderRefusalReleases(t *testing.T) {
	e := newKenv(t, kgrant{name: "card", budget: "10.00", maxUses: 1})
	card := e.root("card")
	e.p.FailNext(1)
	_, err := e.charge(card, chargeArgs("airline.example", "10.00", "k1"))
	wantErrno(t, "provider 500", err, abi.EIO)
	if n := len(e.p.Charges()); n != 0 {
		t.Errorf("provider recorded %d charges after failing", n)
	}
	e.wantUsage("a refused charge", card, 0, 0)
	// The reservation was released, and the key given up: a retry charges.
	if _, err := e.charge(card, chargeArgs("airline.example", "10.00", "k1")); err != nil {
		t.Fatalf("retry after a failure: %v", err)
	}
	if n := len(e.p.Charges()); n != 1 {
		t.Errorf("provider has %d charges, want 1", n)
	}
	e.wantUsage("the retry", card, 1000, 1)

	// The provider refusing the instrument is EIO too, and leaves nothing.
	w := newKenv(t, kgrant{name: "card", budget: "10.00"})
	w.p.RequireInstrument("tok_other")
	wcard := w.root("card")
	_, err = w.charge(wcard, chargeArgs("airline.example", "5", "k"))
	wantErrno(t, "instrument declined", err, abi.EIO)
	if len(w.p.Charges()) != 0 {
		t.Errorf("declined charge: provider %d charges", len(w.p.Charges()))
	}
	w.wantUsage("a declined charge", wcard, 0, 0)
}

// TestKernelProviderTimeout: a charge that timed out may have been made
// (the request left, no answer came back), so it counts: the kernel
// releases only what the kind marks kindapi.NotPerformed. A retry under the
// same key asks the provider again (its idempotency key makes it one charge
// there) and debits nothing more.
func TestKernelProviderTimeout(t *testing.T) {
	e := newKenv(t, kgrant{name: "card", budget: "10.00", extra: `,"timeout":"200ms"`})
	card := e.root("card")
	e.p.Hang(true)
	start := time.Now()
	_, err := e.charge(card, chargeArgs("airline.example", "10.00", "k1"))
	wantErrno(t, "hanging provider", err, abi.ETIMEDOUT)
	// Not a bound on the machine's speed: the default timeout would have
	// ended it only after pay.DefaultTimeout.
	if d := time.Since(start); d >= pay.DefaultTimeout {
		t.Errorf("timed out after %v: the default timeout, not the grant's 200ms", d)
	}
	e.wantUsage("a timed-out charge", card, 1000, 1)
	e.p.Hang(false)
	if _, err := e.charge(card, chargeArgs("airline.example", "10.00", "k1")); err != nil {
		t.Fatalf("retry after a timeout: %v", err)
	}
	if n := len(e.p.Charges()); n != 1 {
		t.Errorf("provider has %d charges, want 1", n)
	}
	// The retry asked the provider again under the same key (one charge
	// there) and debited nothing more: the timed-out attempt was counted.
	e.wantUsage("the retry", card, 1000, 1)
	if _, err := e.charge(card, chargeArgs("airline.example", "10.00", "k1")); err != nil {
		t.Fatalf("a replay of the settled key: %v", err)
	}
	e.wantUsage("a replay", card, 1000, 1)
	_, err = e.charge(card, chargeArgs("airline.example", "0.01", "k2"))
	wantErrno(t, "budget spent by the one charge", err, abi.ELIMIT)
}

// TestKernelProviderUnreachable: a provider that cannot be reached is EIO;
// nothing reached it, so the kind marks it kindapi.NotPerformed and the
// attempt counts nothing.
func TestKernelProviderUnreachable(t *testing.T) {
	e := newKenv(t, kgrant{name: "card", budget: "10.00"})
	card := e.root("card")
	e.p.Close()
	_, err := e.charge(card, chargeArgs("airline.example", "1", "k"))
	wantErrno(t, "provider down", err, abi.EIO)
	e.wantUsage("an unreachable provider", card, 0, 0)
}

// TestKernelApproval: above approve_above the kernel asks its approver,
// showing the charge as the kind prepared it; a no, or an approver that
// fails, stops the charge and counts nothing.
func TestKernelApproval(t *testing.T) {
	e := newKenv(t, kgrant{name: "card", budget: "2000", extra: `,"approve_above":"500"`}, kgrant{name: "plain"})
	card := e.root("card")
	no := func(kernel.ApprovalRequest) (bool, error) { return false, nil }
	// At or below the threshold nobody is asked.
	e.approve(no)
	if _, err := e.charge(card, chargeArgs("airline.example", "500.00", "a")); err != nil {
		t.Fatal(err)
	}
	if a := e.approvals(); len(a) != 0 {
		t.Fatalf("asked %+v for a charge at the threshold", a)
	}
	_, err := e.charge(card, chargeArgs("airline.example", "612", "b"))
	wantErrno(t, "refused", err, abi.EAPPROVAL)
	if a := e.approvals(); len(a) != 1 {
		t.Errorf("asked %d times for a charge above the threshold, want 1", len(a))
	}
	e.approve(func(kernel.ApprovalRequest) (bool, error) { return true, errors.New("terminal closed") })
	_, err = e.charge(card, chargeArgs("airline.example", "612", "c"))
	wantErrno(t, "approver failed", err, abi.EAPPROVAL)
	e.approve(nil)
	_, err = e.charge(card, chargeArgs("airline.example", "612", "d"))
	wantErrno(t, "no approver", err, abi.EAPPROVAL)
	if n := len(e.p.Charges()); n != 1 {
		t.Errorf("provider has %d charges after refusals, want 1", n)
	}
	e.wantUsage("refused approvals", card, 50000, 1)

	e.approve(func(kernel.ApprovalRequest) (bool, error) { return true, nil })
	if _, err := e.charge(card, chargeArgs("airline.example", "612", "b")); err != nil {
		t.Fatalf("approved: %v", err)
	}
	asked := e.approvals()
	if len(asked) != 1 {
		t.Fatalf("asked %d times, want 1", len(asked))
	}
	r := asked[0]
	if r.Summary != "charge 612.00 USD to airline.example" || r.Kind != "pay" || r.Principal != "alice" || r.CapName != "card" || r.Op != "charge" {
		t.Errorf("approval request %+v", r)
	}
	details := map[string]string{}
	for _, d := range r.Details {
		details[d.Name] = d.Value
	}
	if details["amount"] != "612.00" || details["payee"] != "airline.example" || !strings.Contains(details["offer"], `"stops":0`) {
		t.Errorf("details %v", details)
	}
	if len(r.Reasons) != 1 || !strings.Contains(r.Reasons[0], "approve_above 500.00 USD") {
		t.Errorf("reasons %q", r.Reasons)
	}
	if strings.Contains(r.Text(), testInstrument) {
		t.Errorf("the approver is shown the instrument")
	}
	if n := len(e.p.Charges()); n != 2 {
		t.Errorf("provider has %d charges, want 2", n)
	}
	e.wantUsage("an approved charge", card, 111200, 2)

	// A child may add a threshold its parent lacks.
	e.approve(no)
	c := e.mustDerive(e.root("plain"), `{"approve_above":"100"}`)
	_, err = e.charge(c, chargeArgs("airline.example", "100.01", "x"))
	wantErrno(t, "child threshold", err, abi.EAPPROVAL)
	if a := e.approvals(); len(a) != 1 {
		t.Errorf("the child's threshold asked %d times, want 1", len(a))
	}
	if n := len(e.p.Charges()); n != 2 {
		t.Errorf("provider has %d charges, want 2", n)
	}
}

func TestKernelChildSpendingCountsAgainstParent(t *testing.T) {
	e := newKenv(t, kgrant{name: "card", budget: "100"})
	root := e.root("card")
	child := e.mustDerive(root, `{"budget":"80"}`)
	grand := e.mustDerive(child, `{"budget":"50"}`)
	if _, err := e.charge(grand, chargeArgs("airline.example", "50", "a")); err != nil {
		t.Fatal(err)
	}
	_, err := e.charge(grand, chargeArgs("airline.example", "0.01", "b"))
	wantErrno(t, "grandchild budget", err, abi.ELIMIT)
	_, err = e.charge(child, chargeArgs("airline.example", "30.01", "c"))
	wantErrno(t, "child budget after grandchild spent", err, abi.ELIMIT)
	if _, err := e.charge(child, chargeArgs("airline.example", "30", "c")); err != nil {
		t.Fatal(err)
	}
	_, err = e.charge(root, chargeArgs("airline.example", "20.01", "d"))
	wantErrno(t, "root budget after the subtree spent", err, abi.ELIMIT)
	if _, err := e.charge(root, chargeArgs("airline.example", "20", "d")); err != nil {
		t.Fatal(err)
	}
	if e.p.Total() != 10000 {
		t.Errorf("provider total %d", e.p.Total())
	}
	e.wantUsage("root", root, 10000, 3)
	e.wantUsage("child", child, 8000, 2)
	e.wantUsage("grandchild", grand, 5000, 1)
	g, _ := json.Marshal(e.k.Graph())
	if strings.Contains(string(g), testInstrument) {
		t.Errorf("the graph shows the instrument")
	}
	for _, c := range []kcap{root, child, grand} {
		s := c.c.Scope()
		b, _ := json.Marshal(s)
		if strings.Contains(string(b), testInstrument) || strings.Contains(fmt.Sprintf("%v %+v %#v %s", s, s, s, s), testInstrument) {
			t.Errorf("a scope shows the instrument")
		}
	}
}

// TestKernelNarrowAllowance: budget and max_uses in a derive request are
// the kernel's: within the parent's chain, or refused (never clamped).
func TestKernelNarrowAllowance(t *testing.T) {
	e := newKenv(t, kgrant{name: "card", budget: "1000", maxUses: 10, extra: `,"expires":"48h","approve_above":"500"`}, kgrant{name: "plain"})
	card := e.root("card")
	for _, tc := range []struct {
		req  string
		want []abi.Errno
	}{
		{`{"budget":"1000"}`, []abi.Errno{abi.ESUCCESS}},
		{`{"budget":"1000.00 USD"}`, []abi.Errno{abi.ESUCCESS}},
		{`{"budget":"1000.01"}`, []abi.Errno{abi.EDENIED}},
		{`{"budget":"100 EUR"}`, []abi.Errno{abi.EINVAL, abi.EDENIED}},
		{`{"budget":"-1"}`, []abi.Errno{abi.EINVAL}},
		{`{"budget":"0"}`, []abi.Errno{abi.EINVAL}},
		{`{"budget":"1.234"}`, []abi.Errno{abi.EINVAL}},
		{`{"max_uses":10}`, []abi.Errno{abi.ESUCCESS}},
		{`{"max_uses":11}`, []abi.Errno{abi.EDENIED}},
		{`{"max_uses":-1}`, []abi.Errno{abi.EINVAL}},
		{`{"max_uses":0}`, []abi.Errno{abi.EINVAL}},
		{`{"payees":["airline.example"],"budget":"500","max_uses":3}`, []abi.Errno{abi.ESUCCESS}},
		{`{"payees":["evil.example"],"budget":"500"}`, []abi.Errno{abi.EDENIED}},
		{`{"payees":["airline.example"],"budget":"5000"}`, []abi.Errno{abi.EDENIED}},
		{`{"payees":["evil.example"],"budget":"5000","max_uses":99}`, []abi.Errno{abi.EDENIED}},
	} {
		before := len(e.task.Caps())
		c, err := e.derive(card, tc.req)
		if got := kindapi.ErrnoOf(err); !slices.Contains(tc.want, got) {
			t.Errorf("derive %s: %s (%v), want %v", tc.req, got, err, tc.want)
			continue
		}
		if err != nil {
			if n := len(e.task.Caps()); n != before {
				t.Errorf("derive %s: refused, yet the table has %d caps, not %d", tc.req, n, before)
			}
			continue
		}
		if !card.c.Scope().Contains(c.c.Scope()) {
			t.Errorf("derive %s: not contained by the parent", tc.req)
		}
	}
	// The child carries what it asked for.
	c := e.mustDerive(card, `{"budget":"500","max_uses":3}`)
	if u := e.usage(c); u.Budget != 50000 || u.MaxUses != 3 {
		t.Errorf("child allowance %+v, want 500.00 in 3 uses", u)
	}
	// A parent without limits: a child may add them, and is then bounded.
	plain := e.root("plain")
	if u, ok := plain.c.Usage(); ok {
		t.Errorf("a grant without an allowance reports %+v", u)
	}
	pc := e.mustDerive(plain, `{"budget":"5","max_uses":1,"expires":"1h","approve_above":"1"}`)
	for req, want := range map[string]abi.Errno{
		`{"budget":"6"}`:    abi.EDENIED,
		`{"max_uses":2}`:    abi.EDENIED,
		`{"budget":"5"}`:    abi.ESUCCESS,
		`{"budget":"4.99"}`: abi.ESUCCESS,
		`{"max_uses":1}`:    abi.ESUCCESS,
	} {
		if _, err := e.derive(pc, req); kindapi.ErrnoOf(err) != want {
			t.Errorf("grandchild %s: %v, want %s", req, err, want)
		}
	}
	if pc.c.Scope().Contains(plain.c.Scope()) {
		t.Error("a child contains its parent")
	}
	// Deriving spends nothing.
	e.wantUsage("after derivations", card, 0, 0)
}
