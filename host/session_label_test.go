package host_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/manifest"
	"github.com/mandatevm/mandate/runstore"
)

// TestSessionClientLabel: a session starts at its client's label (what
// the client was shown before), is refused when that is above its
// clearance, records its client, and an ended session is done in the
// record and in its graph, with no error logged.
func TestSessionClientLabel(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "leaf.wasm"), leafModule(), 0o644); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(dir, "desk.hcl")
	if err := os.WriteFile(policy, []byte(`session {
  principal = "alice"
  clearance = ["pii:alice"]
}
tool "leaf" {
  module      = "leaf.wasm"
  description = "Does nothing."
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := manifest.LoadPolicy(policy, nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var logs bytes.Buffer
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(b)
	})})
	h, err := host.Open(ctx, host.Options{StateDir: filepath.Join(dir, "state"), CacheDir: testCache(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	pinned, err := h.PinPolicy(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	alice := kindapi.NewLabel([]string{"pii:alice"}, nil)
	s, err := h.StartSession(ctx, host.SessionSpec{Policy: pinned, Client: "desk", Label: alice})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Task().Label(); got.String() != alice.String() {
		t.Errorf("the session task starts at %v, want the client's %v", got, alice)
	}
	s.End()
	out, err := s.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out.State != kernel.TaskDone || out.Record.Run.Module != host.SessionModule+":desk" {
		t.Errorf("the ended session: %s, module %q; want done, %q", out.State, out.Record.Run.Module, host.SessionModule+":desk")
	}
	for _, tk := range out.Record.Graph.Tasks {
		if tk.State != kernel.TaskDone {
			t.Errorf("task %s of the ended session is %s, want done", tk.ID, tk.State)
		}
	}
	mu.Lock()
	if strings.Contains(logs.String(), "[ERROR]") {
		t.Errorf("an ended session logged an error:\n%s", &logs)
	}
	mu.Unlock()

	bob := kindapi.NewLabel([]string{"pii:bob"}, nil)
	_, err = h.StartSession(ctx, host.SessionSpec{Policy: pinned, Client: "desk", Label: bob})
	var re *host.RefusedError
	if !errors.As(err, &re) || re.Record.Run.State != runstore.StateRefused || !strings.Contains(err.Error(), `the client "desk" has been shown {pii:bob}`) {
		t.Fatalf("a session whose client was shown more than its clearance: %v", err)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
