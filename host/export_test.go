package host

import (
	"context"

	"github.com/mandatevm/mandate/sandbox"
)

// AddEngineForTest makes Options.Engine name accept name in this test
// binary, made by f.
func AddEngineForTest(name string, f func(ctx context.Context, cacheDir string) (sandbox.Engine, error)) {
	engines[name] = f
}
