package net_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mandatevm/mandate/caps/net"
	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// TestEffectsAreAudited: a request that changes something (POST) writes
// one outcome entry saying what was asked, as the task wrote it, and how
// it came out, on an unaudited capability too; a GET writes none; the
// bytes of a spliced blob never reach the log; a task whose label has
// confidentiality tags has what it wrote withheld.
func TestEffectsAreAudited(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var got []string // bodies the booking site received
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+string(b))
		mu.Unlock()
		if r.URL.Path == "/book" && r.Method == "POST" {
			w.WriteHeader(http.StatusCreated)
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()

	log := &auditLog{}
	k, err := kernel.New(kernel.Config{Engine: kerneltest.WaitEngine{}, Kinds: []kindapi.Kind{net.New()}, Auditor: log})
	if err != nil {
		t.Fatal(err)
	}
	grant := func(spec string) kindapi.Scope {
		s, err := k.Grant("net", kindapi.GrantContext{}, []byte(spec))
		if err != nil {
			t.Fatalf("grant %s: %v", spec, err)
		}
		return s
	}
	spec := `{"origin":"` + srv.URL + `","methods":["GET","POST"],"paths":["/book","/search"],"clearance":["pii:alice"],"allow_private":true}`
	mod, _ := kerneltest.WaitEngine{}.Compile(ctx, nil)
	parent, err := k.Start(ctx, kernel.TaskSpec{Module: mod, Principal: "alice", Limits: kernel.Limits{Timeout: time.Hour},
		Grants: []kernel.GrantSpec{
			{Name: "book", Kind: "net", Scope: grant(spec)},                 // not audited
			{Name: "audited", Kind: "net", Scope: grant(spec), Audit: true}, // audited
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Kill()
	book, _ := parent.CapByName("book")
	audited, _ := parent.CapByName("audited")
	pp := kindapi.NewBlob([]byte(passport), kindapi.NewLabel([]string{"pii:alice"}, nil))
	task, err := parent.StartChild(ctx, kernel.ChildSpec{Module: mod, Limits: kernel.Limits{Timeout: time.Hour},
		Held: []*kindapi.Blob{pp}, Caps: []kernel.PassedCap{{Name: "book", Cap: book}, {Name: "audited", Cap: audited}}})
	if err != nil {
		t.Fatal(err)
	}
	defer task.Kill()

	fetch := func(capName string, req abi.HTTPRequest) {
		t.Helper()
		h, err := task.Lookup(ctx, capName)
		if err != nil {
			t.Fatal(err)
		}
		args, err := abi.EncodeHTTPRequest(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := task.Invoke(ctx, h, abi.NetFetchOp, args); err != nil {
			t.Fatalf("%s %s: %v", req.Method, req.URL, err)
		}
	}
	// effects returns the outcome entries written since from, and checks
	// that none holds the passport.
	effects := func(from int) []kernel.AuditEvent {
		t.Helper()
		log.mu.Lock()
		defer log.mu.Unlock()
		var out []kernel.AuditEvent
		for _, ev := range log.evs[from:] {
			if strings.Contains(ev.Reason, passport) || ev.Effect != nil && strings.Contains(ev.Effect.Summary+ev.Effect.Outcome, "X1234567") {
				t.Errorf("an audit entry holds the spliced passport: %+v", ev)
			}
			if ev.Decision == kernel.Outcome {
				out = append(out, ev)
			}
		}
		return out
	}
	mark := func() int { log.mu.Lock(); defer log.mu.Unlock(); return len(log.evs) }

	// A POST on an unaudited capability: one outcome entry, with the
	// request as the task wrote it and the status.
	n := mark()
	body := `{"listing_id":"L1","nights":3,"guest":` + abi.SplicePlaceholder(0) + `}`
	fetch("book", abi.HTTPRequest{Method: "POST", URL: "/book?ref=" + abi.SplicePlaceholder(0), Body: []byte(body),
		Splice: []abi.Handle{kernel.HeldHandle(0)}})
	evs := effects(n)
	if len(evs) != 1 || evs[0].Effect == nil {
		t.Fatalf("a POST on an unaudited capability: outcome entries %+v, want one with its effect", evs)
	}
	want := "POST " + srv.URL + `/book?ref=[spliced 0] {"listing_id":"L1","nights":3,"guest":[spliced 0]}`
	if e := evs[0].Effect; e.Summary != want || e.Outcome != "201" {
		t.Errorf("the effect: %q -> %q, want %q -> 201", e.Summary, e.Outcome, want)
	}
	if evs[0].Cap == "" || evs[0].Kind != "net" || evs[0].Op != "call:fetch" {
		t.Errorf("the entry names %q %q %q", evs[0].Cap, evs[0].Kind, evs[0].Op)
	}
	mu.Lock()
	if len(got) != 1 || !strings.Contains(got[0], passport) {
		t.Errorf("the site received %q, want the passport spliced in", got)
	}
	mu.Unlock()

	// A GET is no effect to list: an unaudited one writes nothing.
	n = mark()
	fetch("book", abi.HTTPRequest{Method: "GET", URL: "/search?city=Lisbon"})
	if evs := effects(n); len(evs) != 0 {
		t.Errorf("a GET wrote outcome entries %+v", evs)
	}

	// On an audited capability: allow, then the outcome with its effect.
	n = mark()
	fetch("audited", abi.HTTPRequest{Method: "POST", URL: "/book", Body: []byte(`{"listing_id":"L3"}`)})
	evs = effects(n)
	if len(evs) != 1 || evs[0].Effect == nil || evs[0].Effect.Summary != "POST "+srv.URL+`/book {"listing_id":"L3"}` || evs[0].ArgsDigest == "" {
		t.Errorf("a POST on an audited capability: %+v", evs)
	}
	// An audited GET keeps its outcome entry, with no effect.
	n = mark()
	fetch("audited", abi.HTTPRequest{Method: "GET", URL: "/search"})
	if evs := effects(n); len(evs) != 1 || evs[0].Effect != nil {
		t.Errorf("an audited GET: %+v, want one outcome entry without an effect", evs)
	}

	// A task holding Alice's data: what it wrote is withheld.
	if err := task.Observe(kindapi.NewLabel([]string{"pii:alice"}, nil)); err != nil {
		t.Fatal(err)
	}
	n = mark()
	fetch("book", abi.HTTPRequest{Method: "POST", URL: "/book?name=Alice", Body: []byte(`{"name":"Alice Example"}`)})
	evs = effects(n)
	want = "POST " + srv.URL + "/book [36 bytes the task wrote, labelled pii:alice]"
	if len(evs) != 1 || evs[0].Effect == nil || evs[0].Effect.Summary != want || evs[0].Effect.Outcome != "201" {
		t.Fatalf("a labelled task's POST: %+v (%+v), want %q", evs, evs[0].Effect, want)
	}
	if strings.Contains(evs[0].Effect.Summary, "Alice Example") {
		t.Error("the log holds what a labelled task wrote")
	}
}
