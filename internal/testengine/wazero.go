//go:build !wasmtime

package testengine

import (
	"context"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/wazero"
)

const name = "wazero"

func newEngine(ctx context.Context, cfg sandbox.Config) (sandbox.Engine, error) {
	return wazero.New(ctx, cfg)
}

var buildFlags []string
