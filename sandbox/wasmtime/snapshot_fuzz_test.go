//go:build wasmtime

package wasmtime

import (
	"testing"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/sandboxtest"
)

// FuzzSnapshotStart: a start from a snapshot is exactly a start that runs
// _initialize (sandboxtest.FuzzSnapshot).
func FuzzSnapshotStart(f *testing.F) {
	sandboxtest.FuzzSnapshot(f, func(t testing.TB, cfg sandbox.Config) sandbox.Engine {
		return newTestEngine(t, cfg, options{noSnapshot: cfg.NoSnapshots})
	})
}
