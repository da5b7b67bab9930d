package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/mandatevm/mandate/audit"
)

// auditedManifest writes dir/NAME.hcl: a task running the CLI test guest
// GUEST with one audited net capability on var.origin under /search, and
// dir/fetch.in, the input that makes cli-guest fetch /search and /admin.
func auditedManifest(t *testing.T, dir, name, guest string) string {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join("testdata", "guests", guest))
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(dir, name+".hcl")
	hcl := fmt.Sprintf(`task %q {
  module    = %q
  principal = "alice"
  cap "net" "web" {
    origin        = var.origin
    paths         = ["/search"]
    allow_private = true
    audit         = true
  }
}
`, name, abs)
	if err := os.WriteFile(manifest, []byte(hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fetch.in"), []byte("fetch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return manifest
}

// checkSharedRuns checks a state directory that n runs of an
// auditedManifest with cli-guest wrote at once: n runs in the store, each
// done with its one capability and its one denial (/admin), each with
// entries in the audit log, which verifies and has one checkpoint a run.
// It returns the runs' ids.
func checkSharedRuns(t *testing.T, state string, n int) []string {
	t.Helper()
	ctx := context.Background()
	store, err := openStore(state)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	runs, err := store.List(ctx)
	if err != nil || len(runs) != n {
		t.Fatalf("%d runs recorded (%v), want %d", len(runs), err, n)
	}
	log, err := audit.Open(auditPath(state))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	rep, err := log.Verify(ctx)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.ID)
		rec, err := store.Get(ctx, r.ID)
		if err != nil || rec.Run.State != "done" || len(rec.Tasks) != 1 || len(rec.Caps) != 1 || len(rec.Denials) != 1 {
			t.Errorf("run %s: %+v, %v", r.ID, rec, err)
			continue
		}
		es, err := log.Entries(ctx, audit.Filter{Run: r.ID})
		if err != nil || len(es) == 0 {
			t.Errorf("run %s has %d audit entries (%v)", r.ID, len(es), err)
		}
	}
	if rep.Checkpoints != n {
		t.Errorf("%d checkpoints, want one per run (%d)", rep.Checkpoints, n)
	}
	return ids
}
