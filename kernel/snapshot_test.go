package kernel_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/sandboxtest"
)

// TestSnapshotNeverCarriesATasksInput: a reactor whose init reads its input
// and looks up a capability gets no snapshot, so each task reads its own
// input and holds its own grant, however many tasks of the module ran
// before; a reactor whose init does neither runs from its snapshot and
// still sees each task's input at its entry.
func TestSnapshotNeverCarriesATasksInput(t *testing.T) {
	e := newEnv(t)
	// Where the engine takes snapshots, it says which modules have one,
	// once a task's init was kept or refused.
	snapshotted := func(name string, want bool) {
		t.Helper()
		mod, err := e.eng.Compile(context.Background(), guest(t, name))
		if err != nil {
			t.Fatal(err)
		}
		defer mod.Close(context.Background())
		if _, ok := mod.(sandbox.Snapshotter); ok {
			if used, why := sandboxtest.Settled(t, mod); used != want {
				t.Errorf("%s: snapshot %v (%s), want %v", name, used, why, want)
			}
		}
	}
	// The engine keeps the compiled modules while a handle is held.
	for _, name := range []string{"snapshot-init", "snapshot-clean"} {
		mod, err := e.eng.Compile(context.Background(), guest(t, name))
		if err != nil {
			t.Fatal(err)
		}
		defer mod.Close(context.Background())
	}
	for _, in := range []string{"alice", "bob", "carol"} {
		task, err := e.k.Run(context.Background(), e.spec(t, "snapshot-init", kernel.Limits{Timeout: time.Minute}, in))
		if err != nil {
			t.Fatalf("%s: %v\n%s", in, err, task.Stderr().Data)
		}
		res, _ := task.Result()
		if want := "input=" + in + " cap=ESUCCESS"; string(res) != want {
			t.Errorf("task given %q: %q, want %q", in, res, want)
		}
	}
	snapshotted("snapshot-init", false)
	seen := map[string]bool{}
	for i, in := range []string{"one", "two", "three"} {
		if i == 1 {
			snapshotted("snapshot-clean", true) // the first task's init
		}
		task, err := e.k.Run(context.Background(), e.spec(t, "snapshot-clean", kernel.Limits{Timeout: time.Minute}, in))
		if err != nil {
			t.Fatalf("%s: %v\n%s", in, err, task.Stderr().Data)
		}
		res, _ := task.Result()
		f := strings.Fields(string(res))
		if len(f) != 3 || f[0] != in || f[1] != "999" {
			t.Fatalf("snapshot-clean given %q: %q", in, res)
		}
		if seen[f[2]] {
			t.Errorf("two tasks of one snapshot read the same crypto/rand bytes %s", f[2])
		}
		seen[f[2]] = true
	}
}
