package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"

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

// unknownEngine explains an --engine (or $MANDATE_ENGINE) this binary does
// not have, including an engine compiled out of it.
func unknownEngine(name string) string {
	if name == "wasmtime" {
		return "engine \"wasmtime\" is not in this build of mandate: rebuild with cgo and the tag, " +
			"go build -tags wasmtime ./cmd/mandate (engines here: " + strings.Join(engineNames(), ", ") + ")"
	}
	return fmt.Sprintf("unknown engine %q (engines: %s)", name, strings.Join(engineNames(), ", "))
}
