package cli

import (
	"context"
	"sort"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/wazero"
)

// defaultEngine is the engine runs use unless --engine names another.
const defaultEngine = "wazero"

// engines maps an engine name to its constructor: one line per engine.
// cacheDir is the engine's own on-disk compilation cache.
var engines = map[string]func(ctx context.Context, cacheDir string) (sandbox.Engine, error){
	"wazero": func(ctx context.Context, cacheDir string) (sandbox.Engine, error) {
		return wazero.New(ctx, sandbox.Config{CacheDir: cacheDir})
	},
}

func engineNames() []string {
	names := make([]string, 0, len(engines))
	for n := range engines {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
