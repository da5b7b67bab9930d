package gvc

import (
	"context"

	"github.com/mandatevm/mandate/internal/graphviz/internal/wasm"
)

type Plugin interface {
	raw() *wasm.PluginAPI
}

// DefaultPlugins are the plugins written in Go that New installs: none
// (upstream's were the PNG and JPG renderers, removed from this copy:
// Graphviz's own SVG renderer needs no plugin).
func DefaultPlugins(ctx context.Context) ([]Plugin, error) {
	return nil, nil
}
