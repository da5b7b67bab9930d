package attacks_test

import (
	"context"
	"encoding/json"
	"fmt"
	gonet "net"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/caps/data"
	"github.com/mandatevm/mandate/caps/declassify"
	"github.com/mandatevm/mandate/caps/net"
	"github.com/mandatevm/mandate/caps/pay"
	"github.com/mandatevm/mandate/caps/pay/paytest"
	"github.com/mandatevm/mandate/caps/spawn"
	"github.com/mandatevm/mandate/constraint"
	guest "github.com/mandatevm/mandate/internal/attacks/attack"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/forward"
)

// Secrets the environment holds. None of them may ever reach the evil
// server, nor the granted server outside /vault (the one path cleared for
// Alice's PII).
const (
	alicePassport = "P-ALICE-7731"
	bobPassport   = "P-BOB-5512"
	aliceSalary   = "131313"
	bobSalary     = "242424"
	netSecret     = "net-secret-Hq93LmZx"  // injected Authorization of "web"
	cardSecret    = "tok_card_SECRET_4242" // the pay instrument
	netSecretEnv  = "ATTACK_NET_TOKEN"
	cardSecretEnv = "ATTACK_CARD"
	controlName   = "control"
	guestsDir     = "../../testdata/attacks"
)

// secrets lists every secret with its name, for "never seen" checks.
var secrets = map[string]string{
	"alice's passport": alicePassport, "bob's passport": bobPassport,
	"alice's salary": aliceSalary, "bob's salary": bobSalary,
	"the net credential": netSecret, "the card": cardSecret,
}

// The benefits collection: two principals' records, with labelled fields.
const benefitsJSON = `[
 {"id":"b-alice","owner":"alice","fields":{"plan":"gold","passport":"` + alicePassport + `","salary":` + aliceSalary + `},
  "labels":{"passport":["pii:$owner"],"salary":["financial:$owner"]}},
 {"id":"b-bob","owner":"bob","fields":{"plan":"silver","passport":"` + bobPassport + `","salary":` + bobSalary + `},
  "labels":{"passport":["pii:$owner"],"salary":["financial:$owner"]}}
]`

// resolver serves compiled guests by digest to spawning tasks.
type resolver struct {
	eng  sandbox.Engine
	mu   sync.Mutex
	mods map[string]sandbox.Module
}

func (r *resolver) Module(ctx context.Context, digest string) (sandbox.Module, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, ok := r.mods[digest]; ok {
		return m, nil
	}
	for name, w := range guests {
		if sandbox.Digest(w) == digest {
			m, err := r.eng.Compile(ctx, w)
			if err != nil {
				return nil, fmt.Errorf("compiling %s: %w", name, err)
			}
			r.mods[digest] = m
			return m, nil
		}
	}
	return nil, fmt.Errorf("unknown module %s", digest)
}

// logBuffer is a concurrency-safe log sink.
type logBuffer = kerneltest.Buffer

// env is one kernel with every kind, its servers, store, provider and
// audit log. Each attack gets its own.
type env struct {
	k         *kernel.Kernel
	eng       sandbox.Engine
	res       *resolver
	alog      *audit.Log
	logs      *logBuffer
	store     *data.Store
	provider  *paytest.Provider
	clk       *paytest.Clock
	test      *kerneltest.Kind
	granted   *kerneltest.Recorder
	evil      *kerneltest.Recorder
	approvals atomic.Int64
	fwd       *hostCapture // nil: tasks run on eng

	lookupMu sync.Mutex
	lookups  []string // every host name the net kind resolved; protected by lookupMu

	grantedOrigin, evilOrigin, grantedHost string
	storeBefore                            string
}

// envOptions adjust one attack's environment.
type envOptions struct {
	maxTasks int
	// spec overrides or adds grant spec fields per grant name, as JSON
	// members: {"spawner": `"max_depth":8`}.
	spec map[string]string
	// approve answers approvals; nil: nobody says yes.
	approve func(kernel.ApprovalRequest) bool
	// mints names the grants with approve_mints: a person's yes is
	// remembered for the same effect.
	mints []string
	// fwd, when set, runs every task of the env elsewhere: its guest on
	// a second engine, its host calls forwarded to this kernel
	// (forwarded_test.go).
	fwd *forwarding
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{clk: paytest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))}

	// The evil origin: any request that reaches it is a failure.
	e.evil = kerneltest.NewRecorder(func(w http.ResponseWriter, r *http.Request, _ kerneltest.Request) {
		fmt.Fprint(w, "evil")
	})
	t.Cleanup(e.evil.Close)
	e.evilOrigin = "http://evil.example:" + e.evil.Port()

	// The granted origin: /api is public, /vault is cleared for Alice's
	// PII. /api/redirect is an open redirect, /api/echo and /vault/echo
	// echo the request.
	e.granted = kerneltest.NewRecorder(func(w http.ResponseWriter, r *http.Request, s kerneltest.Request) {
		switch r.URL.Path {
		case "/api/redirect":
			w.Header().Set("Location", r.URL.Query().Get("to"))
			w.WriteHeader(http.StatusFound)
			return
		case "/vault/redirect": // keeps the method and the body
			w.Header().Set("Location", r.URL.Query().Get("to"))
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		case "/api/echo", "/vault/echo":
			w.Write(s.Body)
			return
		case "/api/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		fmt.Fprintf(w, "ok %s %s", r.Method, r.URL.Path)
	})
	t.Cleanup(e.granted.Close)
	e.grantedHost = "granted.example:" + e.granted.Port()
	e.grantedOrigin = "http://" + e.grantedHost

	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		e.lookupMu.Lock()
		e.lookups = append(e.lookups, host)
		e.lookupMu.Unlock()
		switch strings.TrimSuffix(strings.ToLower(host), ".") {
		case "granted.example", "evil.example":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		if strings.HasSuffix(host, ".granted.example") || strings.HasSuffix(host, ".evil.example") {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return nil, &gonet.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	netKind := net.New(net.WithLookup(lookup))
	t.Cleanup(netKind.CloseIdleConnections)

	// The data store: Alice's and Bob's records.
	st, err := data.Open(filepath.Join(t.TempDir(), "data.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	recs, err := data.ParseJSON(strings.NewReader(benefitsJSON))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Import(ctx, "benefits", recs, data.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	e.store = st
	e.storeBefore = e.dumpStore(t)

	e.provider = paytest.NewProvider()
	t.Cleanup(e.provider.Close)
	e.provider.RequireInstrument(cardSecret)
	payKind := pay.New(pay.WithClock(e.clk.Now))
	t.Cleanup(payKind.CloseIdleConnections)

	alog, err := audit.Open(filepath.Join(t.TempDir(), "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { alog.Close() })
	e.alog = alog

	e.logs = &logBuffer{}
	logger := hclog.New(&hclog.LoggerOptions{Output: e.logs, Level: hclog.Debug})
	e.eng = testengine.New(t)
	e.res = &resolver{eng: e.eng, mods: map[string]sandbox.Module{}}
	e.test = kerneltest.New()
	var kernelEng sandbox.Engine = e.eng
	var placer kernel.Placer
	if o.fwd != nil {
		e.fwd = &hostCapture{Engine: e.eng, fwd: o.fwd}
		kernelEng, placer = e.fwd, forward.LoopbackPlacer{Start: e.fwd.start}
		t.Cleanup(func() { e.checkAllForwarded(t) })
	}
	e.k, err = kernel.New(kernel.Config{
		Engine:        kernelEng,
		Placer:        placer,
		Kinds:         []kindapi.Kind{netKind, data.New(st), payKind, spawn.New(), declassify.New(), e.test},
		Declassifiers: []string{declassify.KindName},
		Logger:        logger,
		Auditor:       alog,
		Constraints:   constraint.New(),
		Modules:       e.res,
		MaxTasks:      o.maxTasks,
		Approver: kernel.ApproverFunc(func(_ context.Context, r kernel.ApprovalRequest) (bool, error) {
			e.approvals.Add(1)
			if o.approve != nil {
				return o.approve(r), nil
			}
			return false, nil // nobody says yes
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) dumpStore(t *testing.T) string {
	t.Helper()
	recs, err := e.store.Records(context.Background(), "benefits")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(recs)
	return string(b)
}

// grant is one standard grant: its kind, its spec (JSON members) and
// whether it is audited.
type grant struct {
	name, kind, spec string
	audit            bool
	when, approve    []string
	allow            kernel.Allowance
}

// grants are what every attack's root task holds; an attack uses the ones
// it attacks.
func (e *env) grants(o envOptions) []grant {
	var digests []string
	for _, w := range guests {
		digests = append(digests, sandbox.Digest(w))
	}
	sort.Strings(digests)
	mods, _ := json.Marshal(digests)
	inject := `"headers":[{"name":"Authorization","env":"` + netSecretEnv + `","prefix":"Bearer "}]`
	payBase := `"provider":"` + e.provider.URL + `","allow_private":true,"instrument":{"env":"` + cardSecretEnv + `"},"payees":["airline.example"],"currency":"USD"`
	// The net grants' timeouts (30 s) are hang guards: no row waits for
	// one, and a loaded machine took 2 s over a loopback request.
	gs := []grant{
		// Public web API: GET and POST under /api, no clearance.
		{name: "web", kind: "net", spec: `"origin":"` + e.grantedOrigin + `","methods":["GET","POST"],"paths":["/api"],"allow_private":true,"max_redirects":3,"timeout":"30s",` + inject},
		// The vault: cleared for Alice's PII, audited.
		{name: "vault", kind: "net", spec: `"origin":"` + e.grantedOrigin + `","methods":["POST"],"paths":["/vault"],"allow_private":true,"timeout":"30s","clearance":["pii:alice"]`, audit: true},
		// Alice's benefits: her own record, these fields.
		{name: "mydata", kind: "data", spec: `"collection":"benefits","records":"own","fields":["plan","passport","salary"],"ops":["read","query"]`},
		// Alice's plan, writable.
		{name: "myplan", kind: "data", spec: `"collection":"benefits","records":"own","fields":["plan"],"ops":["read","write"]`},
		// A card: 100 per charge, 250 in all, 10 uses, approval above 80.
		{name: "card", kind: "pay", spec: payBase + `,"max_amount":"100","approve_above":"80","expires":"24h"`, audit: true,
			allow: kernel.Allowance{MaxUses: 10, Budget: 25000}},
		// An expired card (the clock moves 2h on before the run).
		{name: "old", kind: "pay", spec: payBase + `,"max_amount":"100","expires":"1h"`, allow: kernel.Allowance{Budget: 25000}},
		{name: "spawner", kind: "spawn", spec: `"modules":` + string(mods) + `,"max_depth":2,"max_children":4,"max_memory":"64MiB"`},
		// Declassify: drop pii:alice after projecting onto the plan.
		{name: "declass", kind: "declassify", spec: `"drop":["pii:alice"],"project":["fields.plan"]`},
		{name: "test", kind: "test", spec: `"level":5`},
		// A POST to /api/transfer needs a person's yes.
		{name: "transfer", kind: "net", spec: `"origin":"` + e.grantedOrigin + `","methods":["GET","POST"],"paths":["/api/transfer"],"allow_private":true,"timeout":"30s"`,
			audit: true, approve: []string{`request.method == "POST"`}},
	}
	for i, g := range gs {
		if g.name == "spawner" && o.fwd != nil {
			gs[i].spec += `,"placement":"fleet"` // children are forwarded too
		}
		if extra, ok := o.spec[g.name]; ok {
			gs[i].spec += "," + extra
		}
	}
	return gs
}

// grantSpecs builds the root task's grants.
func (e *env) grantSpecs(t *testing.T, o envOptions) []kernel.GrantSpec {
	t.Helper()
	gc := kindapi.GrantContext{LookupEnv: func(name string) (string, bool) {
		switch name {
		case netSecretEnv:
			return netSecret, true
		case cardSecretEnv:
			return cardSecret, true
		}
		return "", false
	}}
	var out []kernel.GrantSpec
	for _, g := range e.grants(o) {
		spec := "{" + g.spec + "}"
		// An override repeats a member; the decoder refuses duplicates.
		spec = dedupJSON(t, spec)
		scope, err := e.k.Grant(g.kind, gc, []byte(spec))
		if err != nil {
			t.Fatalf("grant %s %s: %v", g.name, spec, err)
		}
		cs, err := e.k.CompileConstraints(g.kind, g.when, g.approve)
		if err != nil {
			t.Fatalf("constraints of %s: %v", g.name, err)
		}
		out = append(out, kernel.GrantSpec{Name: g.name, Kind: g.kind, Scope: scope, Audit: g.audit, Constraints: cs, Allowance: g.allow,
			ApproveMints: slices.Contains(o.mints, g.name)})
	}
	return out
}

// dedupJSON re-encodes a JSON object keeping the last value of a repeated
// member, so an attack can override a standard grant's field.
func dedupJSON(t *testing.T, s string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("grant spec %s: %v", s, err)
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func (e *env) input(name, mode string) []byte {
	in := guest.Input{
		Granted: e.grantedOrigin, GrantedHost: e.grantedHost, GrantedPort: e.granted.Port(),
		Evil: e.evilOrigin, EvilPort: e.evil.Port(), Digests: map[string]string{}, Mode: mode,
	}
	for n, w := range guests {
		in.Digests[n] = sandbox.Digest(w)
	}
	in.Self = in.Digests[name]
	b, _ := json.Marshal(in)
	return b
}

// module compiles a built guest.
func (e *env) module(t *testing.T, name string) sandbox.Module {
	t.Helper()
	w, ok := guests[name]
	if !ok {
		t.Fatalf("no guest %q (is testdata/attacks/%s there?)", name, name)
	}
	m, err := e.res.Module(context.Background(), sandbox.Digest(w))
	if err != nil {
		t.Fatal(err)
	}
	return e.place(m)
}

// place returns the module a task of the env runs: m itself, or in a
// forwarded env m run elsewhere with this kernel's host functions.
func (e *env) place(m sandbox.Module) sandbox.Module {
	if e.fwd == nil {
		return m
	}
	return forward.NewModule(m, e.fwd.funcs, e.fwd.start)
}

// hangGuard is the time limit of a task that an attack row expects to
// end by itself (rows that expect a timeout set their own, a second): it
// stops a hang, and measures nothing. A loaded 2-core machine ran rows of
// 10 s limits into them; the rows assert what the kernel decided, never
// how fast.
const hangGuard = 3 * time.Minute

// control runs the well-behaved guest on the same kernel: it must fetch,
// read Alice's plan and finish normally.
func (e *env) control(t *testing.T, o envOptions) {
	t.Helper()
	before := len(e.granted.Requests())
	task, err := e.k.Run(context.Background(), kernel.TaskSpec{
		Module: e.module(t, controlName), Principal: "alice", Grants: e.grantSpecs(t, o),
		Input: e.input(controlName, ""), Limits: kernel.Limits{Timeout: hangGuard, Memory: 64 << 20},
	})
	if err != nil {
		t.Fatalf("the well-behaved guest after the attack: %v\nstderr: %s", err, task.Stderr())
	}
	if got, _ := task.Result(); string(got) != "ok gold" {
		t.Fatalf("the well-behaved guest's result %q, want %q (stderr: %s)", got, "ok gold", task.Stderr())
	}
	after := e.granted.Requests()
	if len(after) != before+1 || after[len(after)-1].Path != "/api/control" {
		t.Fatalf("the granted server did not see the well-behaved guest's request")
	}
}
