package attacks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/sandbox"
)

// attack is one row of the suite.
type attack struct {
	name  string // the row, and the guest under testdata/attacks unless guest is set
	guest string
	law   string // the law or mechanism that stops it
	mode  string // passed to the guest in its input
	opts  envOptions
	// limits of the attacking task; zero fields: 64 MiB, 10 s.
	limits kernel.Limits
	// state is how the task must end; "" means done.
	state kernel.TaskState
	// want is the errno (or detail) of every attempt the guest reports,
	// by its key. Keys starting with "#" are details checked by check.
	want map[string]string
	// audit lists entries that must be in the log, as "decision op errno"
	// (e.g. "deny call:fetch EFLOW").
	audit []string
	// check asserts the attack's side effects beyond the common ones.
	check func(t *testing.T, e *env, o *outcome)
	// before runs on the kernel before the attack (e.g. to move a clock).
	before func(t *testing.T, e *env)
	// refused: the engine must refuse the module (at compile or start),
	// or the task must fail without a result.
	refused bool
	// raw: the result is not a JSON object (check reads o.raw).
	raw bool
	// rate is set on the grant "web".
	rate kernel.Rate
	// hole marks an attack that succeeds today: the row is skipped with
	// this reason (a "HOLE: ..." to fix in the kernel), not papered over.
	hole string
}

// outcome is what a run left behind.
type outcome struct {
	a       *attack
	task    *kernel.Task
	err     error
	raw     []byte
	result  map[string]string
	entries []audit.Entry
}

// want is the row's expected value of key k.
func (o *outcome) want(k string) string { return o.a.want[k] }

// has reports whether the log holds an entry "decision op errno".
func (o *outcome) has(spec string) bool {
	f := strings.Fields(spec)
	for _, en := range o.entries {
		if en.Decision == f[0] && en.Op == f[1] && en.Errno == f[2] {
			return true
		}
	}
	return false
}

func (o *outcome) count(decision, op, errno string) int {
	n := 0
	for _, en := range o.entries {
		if (decision == "" || en.Decision == decision) && (op == "" || en.Op == op) && (errno == "" || en.Errno == errno) {
			n++
		}
	}
	return n
}

func runAttack(t *testing.T, a attack) {
	if a.hole != "" {
		t.Skip(a.hole)
	}
	guest := a.guest
	if guest == "" {
		guest = a.name
	}
	e := newEnv(t, a.opts)
	grants := e.grantSpecs(t, a.opts)
	for i := range grants {
		if grants[i].Name == "web" {
			grants[i].Rate = a.rate
		}
	}
	e.clk.Add(2 * time.Hour) // "old" expires
	if a.before != nil {
		a.before(t, e)
	}
	limits := a.limits
	if limits.Memory == 0 {
		limits.Memory = 64 << 20
	}
	if limits.Timeout == 0 {
		limits.Timeout = hangGuard
	}
	ctx := context.Background()
	if a.refused {
		mod, err := e.res.Module(ctx, sandbox.Digest(guests[guest]))
		if err == nil {
			var task *kernel.Task
			task, err = e.k.Run(ctx, kernel.TaskSpec{Module: e.place(mod), Principal: "alice", Grants: grants, Limits: limits})
			if err == nil {
				t.Fatalf("the module ran to the end (%s)", task.State())
			}
		}
		t.Logf("refused: %v", err)
		e.control(t, a.opts)
		return
	}
	task, err := e.k.Start(ctx, kernel.TaskSpec{
		Module: e.module(t, guest), Principal: "alice", Name: guest,
		Grants: grants, Input: e.input(guest, a.mode), Limits: limits,
	})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	err = task.Wait(ctx)
	o := &outcome{a: &a, task: task, err: err}

	// Containment: the task ended as expected.
	wantState := a.state
	if wantState == "" {
		wantState = kernel.TaskDone
	}
	if task.State() != wantState {
		t.Fatalf("task ended %s (%v), want %s\nstderr: %.2000s", task.State(), err, wantState, task.Stderr())
	}
	if raw, ok := task.Result(); ok {
		o.raw = raw
		if err := json.Unmarshal(raw, &o.result); err != nil && !a.raw {
			t.Fatalf("result %q: %v", raw, err)
		}
	}
	// Containment: every attempt got its errno.
	if a.want != nil && o.result == nil {
		t.Fatalf("no result; stderr: %.2000s", task.Stderr())
	}
	var keys []string
	for k := range a.want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if strings.HasPrefix(k, "#") {
			continue
		}
		if got, ok := o.result[k]; !ok {
			t.Errorf("%s: no result", k)
		} else if got != a.want[k] {
			t.Errorf("%s: got %s, want %s (%s)", k, got, a.want[k], o.result["#why:"+k])
		}
	}
	for k, v := range o.result {
		if _, ok := a.want[k]; !ok && !strings.HasPrefix(k, "#") {
			t.Errorf("unexpected attempt %s = %s", k, v)
		}
	}

	// Audit: the log verifies, holds the denials asked for and every
	// denial of the attacking task.
	rep, verr := e.alog.Verify(ctx)
	if verr != nil {
		t.Errorf("audit log does not verify: %v", verr)
	} else if !rep.OK() {
		t.Errorf("audit log: %+v", rep)
	}
	o.entries, err = e.alog.Entries(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range a.audit {
		if !o.has(spec) {
			t.Errorf("audit log has no entry %q", spec)
		}
	}
	denied := 0
	for _, en := range o.entries {
		// A refused approval is audited as its own entry ("approve:op")
		// besides the call's denial.
		if en.Task == task.ID() && en.Decision == string(kernel.Deny) && !strings.HasPrefix(en.Op, "approve:") {
			denied++
			if en.Principal != "alice" || en.Reason == "" {
				t.Errorf("denial without principal or reason: %+v", en)
			}
		}
	}
	if denied != task.Denials() {
		t.Errorf("the task was refused %d times; the audit log holds %d denials", task.Denials(), denied)
	}

	// No side effect anywhere.
	e.checkNoLeak(t, task)
	if a.check != nil {
		a.check(t, e, o)
	}
	if t.Failed() {
		t.Logf("result: %s", o.raw)
		t.Logf("stdout: %.4000s", task.Stdout())
	}

	// The kernel still serves the next task.
	e.control(t, a.opts)
}

// checkNoLeak asserts what must hold after any attack: nothing reached the
// evil server, no secret left for a place not cleared for it, the store
// is unchanged, the provider charged within the grant, and no secret the
// kernel holds entered the guest.
func (e *env) checkNoLeak(t *testing.T, task *kernel.Task) {
	t.Helper()
	if got := e.evil.Requests(); len(got) > 0 {
		t.Errorf("the evil server received %d requests, first: %s", len(got), got[0])
	}
	for _, s := range e.granted.Requests() {
		if strings.HasPrefix(s.Path, "/vault") {
			if strings.Contains(s.String(), bobPassport) || strings.Contains(s.String(), aliceSalary) {
				t.Errorf("the vault received data it is not cleared for: %s", s)
			}
			continue
		}
		for what, sec := range secrets {
			if sec == netSecret {
				// The kernel injects it as Authorization on "web";
				// it must appear nowhere else.
				h := s.Header.Clone()
				h.Del("Authorization")
				if strings.Contains(s.RequestURI+fmt.Sprint(h)+string(s.Body), sec) {
					t.Errorf("the granted server saw %s outside its header: %s", what, s)
				}
				continue
			}
			if strings.Contains(s.String(), sec) {
				t.Errorf("the public API saw %s: %s", what, s)
			}
		}
	}
	// Nothing was resolved but the granted origin's name: a host name
	// carrying data (DNS exfiltration) or another origin is refused before
	// any lookup.
	e.lookupMu.Lock()
	for _, h := range e.lookups {
		if h != "granted.example" {
			t.Errorf("the net kind resolved %q", h)
		}
	}
	e.lookupMu.Unlock()
	if after := e.dumpStore(t); after != e.storeBefore {
		t.Errorf("the data store changed:\nbefore %s\nafter  %s", e.storeBefore, after)
	}
	var total int64
	for _, c := range e.provider.Charges() {
		total += c.AmountMinor
		if c.Payee != "airline.example" || c.Currency != "USD" || c.AmountMinor > 10000 || c.Instrument != cardSecret {
			t.Errorf("a charge outside the grant: %+v", c)
		}
	}
	if total > 25000 {
		t.Errorf("the provider charged %d, over the 250.00 budget", total)
	}
	out := task.Stdout().String() + task.Stderr().String() + task.LastError()
	if r, ok := task.Result(); ok {
		out += string(r)
	}
	for _, sec := range []string{netSecret, cardSecret} {
		if strings.Contains(out, sec) {
			t.Errorf("a kernel-held secret reached the guest")
		}
	}
}

// providerTotal is what the provider charged, in minor units, and how many
// charges.
func (e *env) providerTotal() (int64, int) {
	cs := e.provider.Charges()
	var total int64
	for _, c := range cs {
		total += c.AmountMinor
	}
	return total, len(cs)
}
