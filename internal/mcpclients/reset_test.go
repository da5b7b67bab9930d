package mcpclients

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/audit"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// TestResetAudited: the shared reset lowers the label, adds a reset to
// the history with who and why, and an entry to the audit log; Clients
// and OpenReadOnly see it, and OpenReadOnly creates no store.
func TestResetAudited(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := OpenReadOnly(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("OpenReadOnly of a directory with no store: %v, want fs.ErrNotExist", err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 0 {
		t.Fatalf("OpenReadOnly created %q", m)
	}
	st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pii := kindapi.NewLabel([]string{"pii:alice"}, nil)
	st.Raise(ctx, "desk", Raise{Run: "r1", Tool: "my_benefits", Label: pii})
	st.Raise(ctx, "bot", Raise{Run: "r2", Tool: "web_search"})
	before, err := ResetAudited(ctx, dir, st, "desk", "ann (uid 1000, /dev/pts/3)", "new task")
	if err != nil || before.String() != pii.String() {
		t.Fatalf("ResetAudited = %v, %v; want %v, nil", before, err, pii)
	}
	ro, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	cs, err := ro.Clients(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].Client != "bot" || cs[1].Client != "desk" || !cs[1].Label.IsZero() {
		t.Errorf("Clients = %+v, want bot and desk, desk unlabelled", cs)
	}
	h, _ := ro.History(ctx, "desk")
	if n := len(h); n != 2 || h[1].Event != EventReset || h[1].By != "ann (uid 1000, /dev/pts/3)" || h[1].Why != "new task" {
		t.Errorf("history %+v, want a raise and the reset by ann", h)
	}
	alog, err := audit.OpenReadOnly(filepath.Join(dir, AuditFile))
	if err != nil {
		t.Fatal(err)
	}
	defer alog.Close()
	es, err := alog.Entries(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Kind != "mcp" || es[0].Op != "reset-label" || es[0].Principal != "ann (uid 1000, /dev/pts/3)" || !strings.Contains(es[0].Reason, "new task") {
		t.Errorf("audit entries %+v, want one reset-label by ann", es)
	}
	if _, err := ResetAudited(ctx, dir, st, "desk", "", "x"); err == nil {
		t.Errorf("a reset by no one was recorded")
	}
}
