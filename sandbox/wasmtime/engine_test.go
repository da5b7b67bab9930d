//go:build wasmtime

package wasmtime

import (
	"context"
	"testing"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/sandboxtest"
)

// newTestEngine starts an engine for a test, on the shared cache unless cfg
// names one, and closes it when the test ends.
func newTestEngine(t testing.TB, cfg sandbox.Config, opt options) *Engine {
	t.Helper()
	ctx := context.Background()
	if cfg.CacheDir == "" {
		cfg.CacheDir = testCacheDir
	}
	e, err := newEngine(ctx, cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(ctx) })
	return e
}

// TestConformance runs the suite every engine passes.
func TestConformance(t *testing.T) {
	sandboxtest.Run(t, func(t testing.TB, cfg sandbox.Config) sandbox.Engine {
		return newTestEngine(t, cfg, options{})
	})
}
