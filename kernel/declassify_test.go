package kernel_test

import (
	"context"
	"sync"
	"testing"

	"github.com/mandatevm/mandate/caps/declassify"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// TestDeclassify: the only way down is an explicit declassify capability;
// its result carries the label it computes (not the caller's), every use is
// audited, and nothing else is lowered.
func TestDeclassify(t *testing.T) {
	audit := &recAudit{}
	e := newEnv(t, func(c *kernel.Config) {
		c.Kinds = append(c.Kinds, declassify.New())
		c.Declassifiers = []string{declassify.KindName}
		c.Auditor = audit
	})
	spec := e.spec(t, "declassify", kernel.Limits{}, `{"id":"p1","fields":{"passport":"X1234567","nationality":"PT"}}`)
	spec.InputLabel = kindapi.NewLabel([]string{"pii:alice"}, nil)
	pub, _ := e.k.Grant("test", kindapi.GrantContext{}, []byte(`{"level":1,"clearance":[]}`))
	dc, err := e.k.Grant("declassify", kindapi.GrantContext{}, []byte(`{"drop":["pii:alice"],"project":["fields.nationality"]}`))
	if err != nil {
		t.Fatal(err)
	}
	spec.Grants = []kernel.GrantSpec{
		{Name: "public", Kind: "test", Scope: pub},
		{Name: "nationality", Kind: "declassify", Scope: dc},
	}
	task, err := e.k.Run(context.Background(), spec)
	if err != nil {
		t.Fatalf("%v\n%s", err, task.Stderr())
	}
	got := resultMap(t, task)
	for k, want := range map[string]string{
		"raw_to_public":                     "EFLOW",
		"declassify":                        "ESUCCESS",
		"read_declassified":                 "ESUCCESS",
		"declassified":                      `{"fields":{"nationality":"PT"}}`,
		"declassified_to_public":            "ESUCCESS",
		"public_after_reading_declassified": "ESUCCESS",
		"widen":                             "EDENIED",
	} {
		if got[k] != want {
			t.Errorf("%s: got %s, want %s", k, got[k], want)
		}
	}
	if l := task.Label(); len(l.Conf()) != 0 {
		t.Errorf("the task's label is %v: reading the declassified blob must not carry pii", l)
	}
	var audited int
	for _, ev := range audit.events() {
		if ev.Kind == "declassify" && ev.Decision == kernel.Allow {
			audited++
		}
	}
	if audited != 1 {
		t.Errorf("%d audited declassify decisions, want 1", audited)
	}
}

// recAudit records audit events, safe for concurrent tasks.
type recAudit struct {
	mu  sync.Mutex
	evs []kernel.AuditEvent
}

func (a *recAudit) Record(_ context.Context, ev kernel.AuditEvent) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.evs = append(a.evs, ev)
	return nil
}

func (a *recAudit) events() []kernel.AuditEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]kernel.AuditEvent(nil), a.evs...)
}
