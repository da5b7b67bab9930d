package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	gonet "net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mandatevm/mandate/caps/net"
	"github.com/mandatevm/mandate/caps/pay"
	"github.com/mandatevm/mandate/caps/pay/paytest"
	"github.com/mandatevm/mandate/constraint"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// The tests of history in constraints (kernel/history.go): a bank on
// loopback, a net capability on it whose `when` reads uses, and a task
// whose module only waits, making its calls from Go (Task.Invoke), where
// a guest's cap_call arrives once its arguments are out of its memory.

// histEnv is a kernel with the net, pay and test kinds and CEL
// constraints, a bank, and a running task.
type histEnv struct {
	k    *kernel.Kernel
	bank *kerneltest.Recorder
	task *kernel.Task
}

// histGrant is a root grant: a net capability on the bank (kind "net",
// spec "" for the default), or another kind's.
type histGrant struct {
	name, kind, spec string
	when, approve    []string
	maxUses          int64
}

func newHistEnv(t *testing.T, handler func(w http.ResponseWriter, r *http.Request, seen kerneltest.Request), approver kernel.Approver, grants ...histGrant) *histEnv {
	t.Helper()
	bank := kerneltest.NewRecorder(handler)
	t.Cleanup(bank.Close)
	k, err := kernel.New(kernel.Config{Engine: kerneltest.WaitEngine{}, Constraints: constraint.New(), Approver: approver,
		Kinds: []kindapi.Kind{net.New(), pay.New(), kerneltest.New()}})
	if err != nil {
		t.Fatal(err)
	}
	var specs []kernel.GrantSpec
	for _, g := range grants {
		if g.kind == "" {
			g.kind = "net"
		}
		if g.spec == "" {
			g.spec = fmt.Sprintf(`{"origin":%q,"methods":["POST"],"allow_private":true}`, bank.URL)
		}
		scope, err := k.Grant(g.kind, kindapi.GrantContext{LookupEnv: func(string) (string, bool) { return "tok_test", true }}, []byte(g.spec))
		if err != nil {
			t.Fatal(err)
		}
		cons, err := k.CompileConstraints(g.kind, g.when, g.approve)
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, kernel.GrantSpec{Name: g.name, Kind: g.kind, Scope: scope, Constraints: cons, Allowance: kernel.Allowance{MaxUses: g.maxUses}})
	}
	mod, _ := kerneltest.WaitEngine{}.Compile(context.Background(), nil)
	task, err := k.Start(context.Background(), kernel.TaskSpec{Module: mod, Principal: "alice", Limits: kernel.Limits{Timeout: time.Hour}, Grants: specs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(task.Kill)
	return &histEnv{k: k, bank: bank, task: task}
}

func (e *histEnv) handle(t *testing.T, name string) abi.Handle {
	t.Helper()
	h, err := e.task.Lookup(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// post sends body as JSON to the bank through h, returning the errno.
func post(task *kernel.Task, h abi.Handle, body any) abi.Errno {
	b, _ := json.Marshal(body)
	args, _ := json.Marshal(map[string]any{"method": "POST", "url": "/transfers", "body": b})
	_, err := task.Invoke(context.Background(), h, "fetch", args)
	return kindapi.ErrnoOf(err)
}

type transfer struct {
	Recipient string  `json:"recipient"`
	Amount    float64 `json:"amount"`
	OrderID   int     `json:"order_id"`
}

// The rules of the issue, one line each, on a net capability.
const (
	bindOnFirstUse  = `size(uses) == 0 || request.body.recipient == uses[0].request.body.recipient`
	onePerRecipient = `!uses.exists(u, u.request.body.recipient == request.body.recipient)`
	sameOrderID     = `uses.all(u, u.request.body.order_id == request.body.order_id)`
	totalAtMost100  = `sum(uses.map(u, double(u.request.body.amount))) + double(request.body.amount) <= 100.0`
	threePerHour    = `uses.filter(u, u.time > now - duration("1h")).size() < 3`
)

// TestHistoryRules: each rule, then a sequence of calls and what each
// gets; a refused call reaches nothing and is not a use.
func TestHistoryRules(t *testing.T) {
	ok, no := abi.ESUCCESS, abi.EDENIED
	type step struct {
		tr   transfer
		want abi.Errno
	}
	for _, tc := range []struct {
		name  string
		when  []string
		steps []step
	}{
		{"bind on first use", []string{bindOnFirstUse}, []step{
			{transfer{Recipient: "GB29"}, ok}, {transfer{Recipient: "GB29"}, ok},
			{transfer{Recipient: "DE00EVIL"}, no}, {transfer{Recipient: "GB29"}, ok},
		}},
		{"one per recipient", []string{onePerRecipient}, []step{
			{transfer{Recipient: "alice"}, ok}, {transfer{Recipient: "bob"}, ok},
			{transfer{Recipient: "alice"}, no}, {transfer{Recipient: "carol"}, ok}, {transfer{Recipient: "bob"}, no},
		}},
		{"the same order id as before", []string{sameOrderID}, []step{
			{transfer{OrderID: 7}, ok}, {transfer{OrderID: 7}, ok}, {transfer{OrderID: 8}, no}, {transfer{OrderID: 7}, ok},
		}},
		{"a total over a field", []string{totalAtMost100}, []step{
			{transfer{Amount: 40}, ok}, {transfer{Amount: 50.5}, ok}, {transfer{Amount: 20}, no}, {transfer{Amount: 9.5}, ok},
			{transfer{Amount: 0.5}, no},
		}},
		{"three an hour", []string{threePerHour}, []step{
			{transfer{}, ok}, {transfer{}, ok}, {transfer{}, ok}, {transfer{}, no},
		}},
		// A refused call is not a use: refused by another when of the
		// same capability, it binds nothing.
		{"refused calls bind nothing", []string{bindOnFirstUse, `request.body.amount <= 50`}, []step{
			{transfer{Recipient: "DE00EVIL", Amount: 900}, no}, {transfer{Recipient: "GB29", Amount: 10}, ok},
			{transfer{Recipient: "DE00EVIL", Amount: 10}, no},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newHistEnv(t, nil, nil, histGrant{name: "bank", when: tc.when})
			h := e.handle(t, "bank")
			sent := 0
			for i, s := range tc.steps {
				if got := post(e.task, h, s.tr); got != s.want {
					t.Fatalf("call %d (%+v): %v, want %v (%s)", i, s.tr, got, s.want, e.task.LastError())
				}
				if s.want == ok {
					sent++
				} else if !strings.Contains(e.task.LastError(), "does not hold") {
					t.Fatalf("call %d: refused with %q, want the constraint's refusal", i, e.task.LastError())
				}
				if got := len(e.bank.Requests()); got != sent {
					t.Fatalf("after call %d the bank got %d requests, want %d", i, got, sent)
				}
			}
		})
	}
}

// TestHistoryApprovalRefused: a call whose constraints passed, recorded
// as pending, then refused by the person, is not a use.
func TestHistoryApprovalRefused(t *testing.T) {
	e := newHistEnv(t, nil, kernel.DenyAll, histGrant{name: "bank", when: []string{bindOnFirstUse}, approve: []string{`request.body.amount > 50`}})
	h := e.handle(t, "bank")
	if got := post(e.task, h, transfer{Recipient: "DE00EVIL", Amount: 900}); got != abi.EAPPROVAL {
		t.Fatalf("a call needing a yes, refused: %v, want EAPPROVAL", got)
	}
	if got := post(e.task, h, transfer{Recipient: "GB29", Amount: 10}); got != abi.ESUCCESS {
		t.Fatalf("the first use after a refused call: %v (%s)", got, e.task.LastError())
	}
	if got := post(e.task, h, transfer{Recipient: "DE00EVIL", Amount: 10}); got != abi.EDENIED {
		t.Fatalf("another recipient after the first use: %v, want EDENIED", got)
	}
}

// TestHistorySubtree: a child's uses count against its ancestor's
// constraint (and the parent's against the child's, through the
// ancestor's history); a child's own history holds its subtree's uses
// only.
func TestHistorySubtree(t *testing.T) {
	e := newHistEnv(t, nil, nil, histGrant{name: "bank", when: []string{onePerRecipient}})
	ctx := context.Background()
	root := e.handle(t, "bank")
	child, err := e.task.DeriveHandle(ctx, root, []byte(`{"when":"size(uses) < 2"}`))
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range []struct {
		h    abi.Handle
		to   string
		want abi.Errno
	}{
		{child, "alice", abi.ESUCCESS},
		{root, "alice", abi.EDENIED}, // the child's use is in the root's history
		{root, "bob", abi.ESUCCESS},
		{child, "bob", abi.EDENIED},    // and the root's, seen by the child through its ancestor
		{child, "carol", abi.ESUCCESS}, // the child's own history: one use of its own
		{child, "dave", abi.EDENIED},   // two: size(uses) < 2 no longer holds
		{root, "dave", abi.ESUCCESS},   // the child's constraint binds the child only
	} {
		if got := post(e.task, s.h, transfer{Recipient: s.to}); got != s.want {
			t.Fatalf("call %d (%s): %v, want %v (%s)", i, s.to, got, s.want, e.task.LastError())
		}
	}
}

// TestHistoryWhatCounts: an effect that failed after the request may have
// left counts as a use; one that reports it did nothing does not; a
// replayed charge (Result.Free) is not a new use.
func TestHistoryWhatCounts(t *testing.T) {
	t.Run("performed", func(t *testing.T) {
		e := newHistEnv(t, nil, nil, histGrant{name: "t", kind: "test", spec: `{"level":1}`, when: []string{`size(uses) == 0`}})
		h := e.handle(t, "t")
		if _, err := e.task.Invoke(context.Background(), h, kerneltest.OpFail, nil); kindapi.ErrnoOf(err) != abi.EIO {
			t.Fatalf("a failing effect: %v, want EIO", err)
		}
		if _, err := e.task.Invoke(context.Background(), h, kerneltest.OpFail, nil); kindapi.ErrnoOf(err) != abi.EDENIED {
			t.Fatalf("after an effect that failed but ran: %v, want EDENIED (it was a use)", err)
		}
	})
	t.Run("not performed", func(t *testing.T) {
		l, err := gonet.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := "http://" + l.Addr().String()
		l.Close()
		e := newHistEnv(t, nil, nil, histGrant{name: "gone", spec: fmt.Sprintf(`{"origin":%q,"methods":["POST"],"allow_private":true}`, closed), when: []string{`size(uses) == 0`}})
		h := e.handle(t, "gone")
		for i := range 3 {
			if got := post(e.task, h, transfer{}); got == abi.ESUCCESS || got == abi.EDENIED {
				t.Fatalf("call %d to a closed port: %v, want the dial's error (nothing left: not a use)", i, got)
			}
		}
	})
	t.Run("replayed", func(t *testing.T) {
		prov := paytest.NewProvider()
		defer prov.Close()
		spec := fmt.Sprintf(`{"provider":%q,"allow_private":true,"instrument":{"env":"CARD"},"payees":["airline.example"],"currency":"USD"}`, prov.URL)
		e := newHistEnv(t, nil, nil, histGrant{name: "card", kind: "pay", spec: spec, when: []string{`size(uses) < 2`}})
		h := e.handle(t, "card")
		charge := func(key string) abi.Errno {
			args, _ := json.Marshal(map[string]any{"payee": "airline.example", "amount": "15.00", "currency": "USD", "idempotency_key": key})
			_, err := e.task.Invoke(context.Background(), h, pay.ChargeOp, args)
			return kindapi.ErrnoOf(err)
		}
		for i, s := range []struct {
			key  string
			want abi.Errno
		}{{"k1", abi.ESUCCESS}, {"k1", abi.ESUCCESS}, {"k2", abi.ESUCCESS}, {"k3", abi.EDENIED}} {
			if got := charge(s.key); got != s.want {
				t.Fatalf("charge %d (%s): %v, want %v (%s)", i, s.key, got, s.want, e.task.LastError())
			}
		}
		if got := prov.Total(); got != 3000 {
			t.Fatalf("provider total %d, want 3000 (two charges)", got)
		}
	})
}

// TestHistoryRace: many calls at once, each through a capability of its
// own derived from the grant, on one recipient: exactly one passes
// "one per recipient", and the bank gets exactly one request. The bank
// answers slowly, so every call is decided while the first is pending.
func TestHistoryRace(t *testing.T) {
	slow := func(w http.ResponseWriter, _ *http.Request, _ kerneltest.Request) { time.Sleep(50 * time.Millisecond) }
	e := newHistEnv(t, slow, nil, histGrant{name: "bank", when: []string{onePerRecipient}})
	root := e.handle(t, "bank")
	const n = 32
	hs := make([]abi.Handle, n)
	for i := range hs {
		h, err := e.task.DeriveHandle(context.Background(), root, []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		hs[i] = h
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	errnos := make([]abi.Errno, n)
	for i := range hs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errnos[i] = post(e.task, hs[i], transfer{Recipient: "alice"})
		}()
	}
	close(start)
	wg.Wait()
	counts := map[abi.Errno]int{}
	for _, errno := range errnos {
		counts[errno]++
	}
	if counts[abi.ESUCCESS] != 1 || counts[abi.EDENIED] != n-1 {
		t.Fatalf("racing calls: %v, want 1 ESUCCESS and %d EDENIED", counts, n-1)
	}
	if got := len(e.bank.Requests()); got != 1 {
		t.Fatalf("the bank got %d requests, want 1", got)
	}
}

// TestHistoryPending: a call decided but not ended is in uses, pending;
// a rule can tell it from one that ended.
func TestHistoryPending(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	var once sync.Once
	hold := func(w http.ResponseWriter, _ *http.Request, _ kerneltest.Request) {
		once.Do(func() { // the first request only
			arrived <- struct{}{}
			<-release
		})
	}
	e := newHistEnv(t, hold, nil, histGrant{name: "bank", when: []string{`uses.all(u, !u.pending)`, `uses.all(u, u.time <= now)`}})
	h := e.handle(t, "bank")
	first := make(chan abi.Errno)
	go func() { first <- post(e.task, h, transfer{}) }()
	<-arrived
	if got := post(e.task, h, transfer{}); got != abi.EDENIED {
		t.Fatalf("a call while another is pending: %v, want EDENIED", got)
	}
	close(release)
	if got := <-first; got != abi.ESUCCESS {
		t.Fatalf("the first call: %v", got)
	}
	if got := post(e.task, h, transfer{}); got != abi.ESUCCESS {
		t.Fatalf("a call once the first ended: %v (%s)", got, e.task.LastError())
	}
}

// TestHistoryBounds: a history keeps the last kernel.MaxHistory uses, so
// "one per recipient" forgets the oldest (max_uses is the exact bound);
// a call whose variables are larger than kernel.MaxUseBytes is refused on
// a capability that keeps a history, and allowed on one that does not.
func TestHistoryBounds(t *testing.T) {
	e := newHistEnv(t, nil, nil,
		histGrant{name: "bank", when: []string{onePerRecipient}},
		histGrant{name: "plain", when: []string{`request.body.amount >= 0`}})
	h := e.handle(t, "bank")
	for i := range kernel.MaxHistory + 1 {
		if got := post(e.task, h, transfer{Recipient: fmt.Sprint("r", i)}); got != abi.ESUCCESS {
			t.Fatalf("recipient %d: %v (%s)", i, got, e.task.LastError())
		}
	}
	if got := post(e.task, h, transfer{Recipient: fmt.Sprint("r", kernel.MaxHistory)}); got != abi.EDENIED {
		t.Fatalf("the newest recipient again: %v, want EDENIED", got)
	}
	if got := post(e.task, h, transfer{Recipient: "r0"}); got != abi.ESUCCESS {
		t.Fatalf("the oldest recipient again, past the history's %d uses: %v, want ESUCCESS (forgotten)", kernel.MaxHistory, got)
	}
	big := transfer{Recipient: strings.Repeat("x", kernel.MaxUseBytes)}
	if got := post(e.task, h, big); got != abi.ELIMIT {
		t.Fatalf("a call larger than a use may be: %v, want ELIMIT", got)
	}
	if !strings.Contains(e.task.LastError(), "history") {
		t.Fatalf("refused with %q", e.task.LastError())
	}
	if got := post(e.task, e.handle(t, "plain"), big); got != abi.ESUCCESS {
		t.Fatalf("the same call on a capability without history: %v (%s)", got, e.task.LastError())
	}
	sent := len(e.bank.Requests())
	if want := kernel.MaxHistory + 3; sent != want {
		t.Fatalf("the bank got %d requests, want %d", sent, want)
	}
}

// TestHistorySurvivesForget: a host forgets the children that ended; the
// uses they made stay in the history of the capability they were passed
// from.
func TestHistorySurvivesForget(t *testing.T) {
	e := newHistEnv(t, nil, nil, histGrant{name: "bank", when: []string{onePerRecipient}})
	ctx := context.Background()
	grant, _ := e.task.CapByName("bank")
	mod, _ := kerneltest.WaitEngine{}.Compile(ctx, nil)
	for _, to := range []string{"alice", "bob"} {
		c, err := e.task.StartChild(ctx, kernel.ChildSpec{Module: mod, Limits: kernel.Limits{Timeout: time.Hour},
			Caps: []kernel.PassedCap{{Name: "bank", Cap: grant}}})
		if err != nil {
			t.Fatal(err)
		}
		h, err := c.Lookup(ctx, "bank")
		if err != nil {
			t.Fatal(err)
		}
		if got := post(c, h, transfer{Recipient: to}); got != abi.ESUCCESS {
			t.Fatalf("child's call to %s: %v (%s)", to, got, c.LastError())
		}
		c.Kill()
		<-c.Done()
		if err := e.k.Forget(c); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(e.k.Graph().Caps); n != 1 {
		t.Fatalf("after forgetting the children the kernel keeps %d capabilities, want 1", n)
	}
	h := e.handle(t, "bank")
	for _, s := range []struct {
		to   string
		want abi.Errno
	}{{"alice", abi.EDENIED}, {"bob", abi.EDENIED}, {"carol", abi.ESUCCESS}} {
		if got := post(e.task, h, transfer{Recipient: s.to}); got != s.want {
			t.Fatalf("after the children were forgotten, %s: %v, want %v", s.to, got, s.want)
		}
	}
}

// TestReservedVars: a kind may not declare a variable the kernel adds.
func TestReservedVars(t *testing.T) {
	for _, name := range []string{kernel.UsesVar, kernel.NowVar, kernel.UseTimeField, kernel.UsePendingField} {
		if _, err := kernel.New(kernel.Config{Engine: kerneltest.WaitEngine{}, Kinds: []kindapi.Kind{varsKind{kerneltest.New(), name}}}); err == nil {
			t.Errorf("a kind declaring %q was registered", name)
		}
	}
}

type varsKind struct {
	*kerneltest.Kind
	v string
}

func (k varsKind) Info() kindapi.Info {
	info := k.Kind.Info()
	info.Vars = []string{k.v}
	return info
}
