package host_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/sandbox"
)

// heldEngine is the engine under test, its compiles held until release
// is closed.
type heldEngine struct {
	sandbox.Engine
	release chan struct{}
}

func (e *heldEngine) Compile(ctx context.Context, wasm []byte) (sandbox.Module, error) {
	return e.CompileWith(ctx, wasm, sandbox.CompileConfig{})
}

func (e *heldEngine) CompileWith(ctx context.Context, wasm []byte, cfg sandbox.CompileConfig) (sandbox.Module, error) {
	<-e.release
	return e.Engine.CompileWith(ctx, wasm, cfg)
}

// TestSlowStepsAreSaid: a guest's build and a module's compile that go on
// past a moment are said (a first run is not silent for seconds), the
// build through the build notes, the compile in the run's log.
func TestSlowStepsAreSaid(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a guest")
	}
	defer host.SetSlowStepForTest(time.Millisecond)()
	var mu sync.Mutex
	var notes []string
	ctx := host.WithBuildNotes(context.Background(), func(msg string) {
		mu.Lock()
		notes = append(notes, msg)
		mu.Unlock()
	})
	m := benefits(t, "alice.hcl")
	// A cache of its own: in the shared one, a build whose sources are
	// unchanged can be found in less than the millisecond it waits.
	if _, err := host.BuildGuest(ctx, m.ModulePath, false, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	said := strings.Join(notes, "\n")
	mu.Unlock()
	if !strings.Contains(said, "building the guest in ") {
		t.Errorf("the build said: %q", said)
	}

	release := make(chan struct{})
	host.AddEngineForTest("held", func(ctx context.Context, _ string) (sandbox.Engine, error) {
		inner, err := host.NewEngine(ctx, testengine.Name(), testengine.CacheDir())
		if err != nil {
			return nil, err
		}
		return &heldEngine{Engine: inner, release: release}, nil
	})
	var log kerneltest.Buffer
	h, err := host.Open(context.Background(), host.Options{StateDir: t.TempDir(), CacheDir: testCache(), Engine: "held",
		Logger: hclog.New(&hclog.LoggerOptions{Output: &log, Level: hclog.Info})})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	done := make(chan error, 1)
	go func() {
		r, err := h.Start(context.Background(), host.RunSpec{Manifest: m})
		if err == nil {
			_, err = r.Wait(context.Background())
		}
		done <- err
	}()
	for !strings.Contains(log.String(), "compiling the module") {
		select {
		case err := <-done:
			t.Fatalf("the run ended (%v) before its compile was said:\n%s", err, log.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
