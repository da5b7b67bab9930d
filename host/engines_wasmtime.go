//go:build wasmtime

package host

import (
	"context"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/wasmtime"
)

// In a build with the tag "wasmtime", Options.Engine "wasmtime" runs guests on
// sandbox/wasmtime.
func init() {
	engines[wasmtime.Name] = func(ctx context.Context, cacheDir string) (sandbox.Engine, error) {
		return wasmtime.New(ctx, sandbox.Config{CacheDir: cacheDir})
	}
}
