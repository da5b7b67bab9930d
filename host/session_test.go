package host_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/manifest"
	"github.com/mandatevm/mandate/runstore"
)

// TestSession: a session is a run on the host. Its tools' modules are
// pinned once and compiled on the host's engine for every session; each
// call is a child of the session task, holding its tool's capabilities;
// a session its host ends is recorded as done, its calls with it; and a
// refused start is recorded as refused.
func TestSession(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	leaf := filepath.Join(dir, "leaf.wasm")
	if err := os.WriteFile(leaf, leafModule(), 0o644); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(dir, "desk.hcl")
	if err := os.WriteFile(policy, []byte(`session {
  principal = "alice"
}
tool "leaf" {
  module      = "leaf.wasm"
  description = "Does nothing."
  cap "spawn" "spawner" {
    modules = ["leaf.wasm"]
  }
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := manifest.LoadPolicy(policy, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(ctx, host.Options{StateDir: filepath.Join(dir, "state"), CacheDir: testCache()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	pinned, err := h.PinPolicy(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	// The module file changes: sessions run what was pinned.
	if err := os.WriteFile(leaf, []byte("not wasm"), 0o644); err != nil {
		t.Fatal(err)
	}
	var mods []string
	for range 2 {
		s, err := h.StartSession(ctx, host.SessionSpec{Policy: pinned})
		if err != nil {
			t.Fatal(err)
		}
		tools := s.Tools()
		if len(tools) != 1 || len(tools[0].Caps) != 1 || tools[0].Caps[0] != "spawner" {
			t.Fatalf("tools %+v", tools)
		}
		mods = append(mods, tools[0].Module.Digest())
		spawner, ok := s.Task().CapByName(host.SessionCapName("leaf", "spawner"))
		if !ok {
			t.Fatal("the session task does not hold leaf.spawner")
		}
		c, err := s.Task().StartChild(ctx, kernel.ChildSpec{Module: tools[0].Module, Name: "leaf",
			Caps: []kernel.PassedCap{{Name: "spawner", Cap: spawner}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		s.End()
		out, err := s.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if out.State != kernel.TaskDone || out.Exit != host.ExitOK || out.Record.Run.Task != host.SessionTaskName {
			t.Fatalf("an ended session: %s, exit %d, task %q", out.State, out.Exit, out.Record.Run.Task)
		}
		if n := len(out.Record.Graph.Tasks); n != 2 {
			t.Errorf("the session's record has %d tasks, want the session and its call", n)
		}
	}
	if mods[0] != mods[1] {
		t.Errorf("two sessions ran %s and %s", mods[0], mods[1])
	}

	// A session whose tools' capabilities exceed its handles is refused,
	// and recorded so.
	bad := filepath.Join(dir, "bad.hcl")
	if err := os.WriteFile(bad, []byte(`session {
  principal = "alice"
  limits {
    handles = 1
  }
}
tool "a" {
  module      = "`+filepath.Join(dir, "a.wasm")+`"
  description = "a"
  cap "spawn" "s1" {
    modules = ["a.wasm"]
  }
  cap "spawn" "s2" {
    modules = ["a.wasm"]
  }
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.wasm"), leafModule(), 0o644); err != nil {
		t.Fatal(err)
	}
	bp, err := manifest.LoadPolicy(bad, nil)
	if err != nil {
		t.Fatal(err)
	}
	bpinned, err := h.PinPolicy(ctx, bp)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.StartSession(ctx, host.SessionSpec{Policy: bpinned})
	var re *host.RefusedError
	if !errors.As(err, &re) || re.Record.Run.State != runstore.StateRefused || !strings.Contains(re.Error(), "handle limit") {
		t.Fatalf("a session whose grants exceed its handles: %v", err)
	}
}
