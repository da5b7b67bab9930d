//go:build wasmtime

package cli

import (
	"context"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/wasmtime"
)

// In a build with the tag "wasmtime", --engine wasmtime runs guests on
// sandbox/wasmtime.
func init() {
	engines[wasmtime.Name] = func(ctx context.Context, cacheDir string) (sandbox.Engine, error) {
		return wasmtime.New(ctx, sandbox.Config{CacheDir: cacheDir})
	}
}
