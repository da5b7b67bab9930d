//go:build wasmtime

package wasmtime

import (
	"context"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/sandboxtest"
)

// TestSnapshot: a Go reactor starts from its snapshot on wasmtime too (its
// compiled module, from the cache or not, has no _initialize) and works; a
// reactor whose init calls the host gets none and still runs, its init per
// task.
func TestSnapshot(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for round := range 2 { // the second from the compilation cache
		e, err := New(ctx, sandbox.Config{CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		h := &sandboxtest.TestHost{}
		if err := e.Host("mandate_test", h.Funcs()); err != nil {
			t.Fatal(err)
		}
		mod, err := e.Compile(ctx, sandboxtest.Guest("reactor"))
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			// The first task's init is the snapshot.
			if used, _ := mod.(*Module).Snapshot(); used {
				t.Fatal("a snapshot before any task ran")
			}
			if err := mod.Run(ctx, sandbox.RunConfig{Entry: "run", MemoryLimit: 64 << 20}); err != nil {
				t.Fatalf("the first run: %v", err)
			}
			sandboxtest.Settled(t, mod)
		}
		if used, why := mod.(*Module).Snapshot(); !used {
			t.Fatalf("round %d: the reactor has no snapshot: %s", round, why)
		}
		calls := len(h.Calls())
		for i := range 3 {
			if err := mod.Run(ctx, sandbox.RunConfig{Entry: "run", MemoryLimit: 64 << 20}); err != nil {
				t.Fatalf("round %d, run %d from the snapshot: %v", round, i, err)
			}
		}
		if n := len(h.Calls()) - calls; n != 3 {
			t.Errorf("round %d: %d host calls, want 3", round, n)
		}
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
				t.Errorf("round %d, run %d: init's host call in the task: %q", round, i, got)
			}
		}
		sandboxtest.Settled(t, mod3)
		used, why := mod3.(*Module).Snapshot()
		if used || !strings.Contains(why, "mandate_test.echo") {
			t.Fatalf("round %d: a reactor calling the host in init: snapshot %v (%s)", round, used, why)
		}
		e.Close(ctx)
	}
}
