package host

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/wazero"
)

// DefaultEngine is the engine runs use unless Options.Engine names another.
const DefaultEngine = "wazero"

// engines maps an engine name to its constructor: one line per engine.
// cacheDir is the engine's own on-disk compilation cache.
var engines = map[string]func(ctx context.Context, cacheDir string) (sandbox.Engine, error){
	"wazero": func(ctx context.Context, cacheDir string) (sandbox.Engine, error) {
		return wazero.New(ctx, sandbox.Config{CacheDir: cacheDir})
	},
}

// EngineNames lists the engines in this build, sorted.
func EngineNames() []string {
	names := make([]string, 0, len(engines))
	for n := range engines {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// HasEngine reports whether this build has the engine name.
func HasEngine(name string) bool { _, ok := engines[name]; return ok }

// NewEngine makes the engine name, its compilation cache in cacheDir
// (none when empty).
func NewEngine(ctx context.Context, name, cacheDir string) (sandbox.Engine, error) {
	f, ok := engines[name]
	if !ok {
		return nil, fmt.Errorf("%s", UnknownEngine(name))
	}
	return f(ctx, cacheDir)
}

// UnknownEngine explains an engine this binary does not have, including
// an engine compiled out of it.
func UnknownEngine(name string) string {
	if name == "wasmtime" {
		return "engine \"wasmtime\" is not in this build of mandate: rebuild with cgo and the tag, " +
			"go build -tags wasmtime ./cmd/mandate (engines here: " + strings.Join(EngineNames(), ", ") + ")"
	}
	return fmt.Sprintf("unknown engine %q (engines: %s)", name, strings.Join(EngineNames(), ", "))
}
