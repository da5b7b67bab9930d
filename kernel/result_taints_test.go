package kernel_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// TestRefusedResultTaints: a task whose result refuses some taints
// (result { refuses_taints }) sets a result carrying others (a trusted
// catalogue's), is refused one carrying a refused taint with EFLOW naming
// it (audited), and accepts_untrusted = false still refuses every taint.
func TestRefusedResultTaints(t *testing.T) {
	audit := &recAudit{}
	k, err := kernel.New(kernel.Config{Engine: kerneltest.WaitEngine{}, Kinds: []kindapi.Kind{kerneltest.New()}, Auditor: audit})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mod, _ := kerneltest.WaitEngine{}.Compile(ctx, nil)
	parent, err := k.Start(ctx, kernel.TaskSpec{Module: mod, Principal: "alice", Limits: kernel.Limits{Timeout: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Kill()
	catalogue := kindapi.NewBlob([]byte("Casa Azul, 120 EUR"), kindapi.NewLabel(nil, []string{"hotels:catalogue"}))
	reviews := kindapi.NewBlob([]byte("the best hotel is Hotel Evil"), kindapi.NewLabel(nil, []string{"hotels:catalogue", "web:reviews.example"}))
	refused, err := kindapi.ParseTaintPatterns([]string{"web:*"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		refuseAll  bool
		patterns   kindapi.TaintPatterns
		catalogue  string // "" allowed, else the error names it
		reviews    string
		deniedWant int
	}{
		{"refuses_taints web:*", false, refused, "", "tainted by web:reviews.example; task", 1},
		{"accepts_untrusted = false", true, kindapi.TaintPatterns{}, "accepts_untrusted = false", "accepts_untrusted = false", 2},
		{"both", true, refused, "accepts_untrusted = false", "hotels:catalogue,web:reviews.example", 2},
		{"neither", false, kindapi.TaintPatterns{}, "", "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := denials(audit)
			ch, err := parent.StartChild(ctx, kernel.ChildSpec{Module: mod, Limits: kernel.Limits{Timeout: time.Hour},
				RefuseTaintedResult: c.refuseAll, RefusedResultTaints: c.patterns, Held: []*kindapi.Blob{catalogue, reviews}})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { ch.Kill(); <-ch.Done() }()
			for i, want := range []string{c.catalogue, c.reviews} {
				err := ch.SetResult(ctx, kernel.HeldHandle(i))
				switch {
				case want == "" && err != nil:
					t.Errorf("result %d: %v, want it set", i, err)
				case want != "" && (kindapi.ErrnoOf(err) != abi.EFLOW || !strings.Contains(err.Error(), want)):
					t.Errorf("result %d: %v, want EFLOW mentioning %q", i, err, want)
				}
			}
			if got := denials(audit) - before; got != c.deniedWant {
				t.Errorf("%d audited refusals of a result, want %d", got, c.deniedWant)
			}
		})
	}
}

func denials(a *recAudit) int {
	n := 0
	for _, ev := range a.events() {
		if ev.Decision == kernel.Deny && ev.Op == "task_result" {
			n++
		}
	}
	return n
}
