package wazero

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/sandboxtest"
)

func snapshotEngine(t *testing.T, cfg sandbox.Config) (*Engine, *sandboxtest.TestHost) {
	t.Helper()
	e, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	h := &sandboxtest.TestHost{}
	if err := e.Host("mandate_test", h.Funcs()); err != nil {
		t.Fatal(err)
	}
	return e, h
}

// TestSnapshot: a Go reactor starts from its snapshot (no _initialize per
// task) and works as it did; the snapshot is cached on disk and a damaged
// one is taken again; a reactor whose init calls the host gets none, and
// still runs, with its init run per task.
func TestSnapshot(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e, h := snapshotEngine(t, sandbox.Config{CacheDir: dir})
	mod, err := e.Compile(ctx, sandboxtest.Guest("reactor"))
	if err != nil {
		t.Fatal(err)
	}
	if used, why := mod.(*Module).Snapshot(); used || why != "" {
		t.Fatalf("a snapshot before any task ran: %v %q", used, why)
	}
	// The first task's init is the snapshot.
	if err := mod.Run(ctx, sandbox.RunConfig{Entry: "run", MemoryLimit: 64 << 20}); err != nil {
		t.Fatalf("the first run: %v", err)
	}
	sandboxtest.Settled(t, mod)
	if used, why := mod.(*Module).Snapshot(); !used {
		t.Fatalf("the reactor has no snapshot: %s", why)
	}
	for i := range 3 {
		if err := mod.Run(ctx, sandbox.RunConfig{Entry: "run", MemoryLimit: 64 << 20}); err != nil {
			t.Fatalf("run %d from the snapshot: %v", i, err)
		}
	}
	if n := len(h.Calls()); n != 4 {
		t.Errorf("%d host calls, want 4 (one per run, none from the snapshot's init)", n)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "snapshots", "v*-*.wasm"))
	if len(files) != 1 {
		t.Fatalf("snapshot files: %v", files)
	}
	// A damaged snapshot is not used: taken again.
	b, _ := os.ReadFile(files[0])
	b[len(b)-10] ^= 0xff
	if err := os.WriteFile(files[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	e2, _ := snapshotEngine(t, sandbox.Config{CacheDir: dir})
	mod2, err := e2.Compile(ctx, sandboxtest.Guest("reactor"))
	if err != nil {
		t.Fatal(err)
	}
	if err := mod2.Run(ctx, sandbox.RunConfig{Entry: "run"}); err != nil {
		t.Fatal(err)
	}
	sandboxtest.Settled(t, mod2)
	if used, why := mod2.(*Module).Snapshot(); !used {
		t.Fatalf("no snapshot after a damaged one: %s", why)
	}
	// An engine of a later process starts from the cached one at once.
	e5, _ := snapshotEngine(t, sandbox.Config{CacheDir: dir})
	mod5, err := e5.Compile(ctx, sandboxtest.Guest("reactor"))
	if err != nil {
		t.Fatal(err)
	}
	if used, why := mod5.(*Module).Snapshot(); !used {
		t.Fatalf("the cached snapshot is not used: %s", why)
	}

	// A host call during init: no snapshot, and the task still runs.
	mod3, err := e.Compile(ctx, sandboxtest.Guest("initcall"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		before := len(h.Calls())
		if err := mod3.Run(ctx, sandbox.RunConfig{Entry: "run"}); err != nil {
			t.Fatal(err)
		}
		if got := h.Calls()[before:]; len(got) != 1 || !strings.HasSuffix(got[0], ":init") {
			t.Errorf("run %d: init's host call in the task: %q", i, got)
		}
	}
	sandboxtest.Settled(t, mod3)
	if used, why := mod3.(*Module).Snapshot(); used || !strings.Contains(why, "mandate_test.echo") {
		t.Fatalf("a reactor calling the host in init: snapshot %v (%s)", used, why)
	}
	if _, err := os.Stat(filepath.Join(dir, "snapshots")); err != nil {
		t.Fatal(err)
	}
	refused, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*.none"))
	if len(refused) != 1 {
		t.Errorf("the refusal is not remembered: %v", refused)
	}
	// NoSnapshots: _initialize per task.
	e4, _ := snapshotEngine(t, sandbox.Config{NoSnapshots: true})
	mod4, err := e4.Compile(ctx, sandboxtest.Guest("reactor"))
	if err != nil {
		t.Fatal(err)
	}
	if err := mod4.Run(ctx, sandbox.RunConfig{Entry: "run"}); err != nil {
		t.Fatal(err)
	}
	if used, why := mod4.(*Module).Snapshot(); used || mod4.(*Module).c.taker != nil {
		t.Fatalf("NoSnapshots took a snapshot (%s)", why)
	}
}
