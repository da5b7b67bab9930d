package host

import (
	"context"
	"time"

	"github.com/mandatevm/mandate/sandbox"
)

// AddEngineForTest makes Options.Engine name accept name in this test
// binary, made by f.
func AddEngineForTest(name string, f func(ctx context.Context, cacheDir string) (sandbox.Engine, error)) {
	engines[name] = f
}

// SetSlowStepForTest sets how long a build or compile goes on before it
// is said; the returned func restores it.
func SetSlowStepForTest(d time.Duration) func() {
	old := slowStep
	slowStep = d
	return func() { slowStep = old }
}
