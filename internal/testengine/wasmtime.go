//go:build wasmtime

package testengine

import (
	"context"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/wasmtime"
)

const name = "wasmtime"

func newEngine(ctx context.Context, cfg sandbox.Config) (sandbox.Engine, error) {
	return wasmtime.New(ctx, cfg)
}

var buildFlags = []string{"-tags", "wasmtime"}
