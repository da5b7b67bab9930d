// Package testengine gives tests the WebAssembly engine they run guests on,
// so one suite of guest tests covers both engines: sandbox/wazero in a
// default build (go test ./...), sandbox/wasmtime in a build with the tag
// "wasmtime" (go test -tags wasmtime ./...).
//
//	eng := testengine.New(t) // closed when the test ends
//	mod, err := eng.Compile(ctx, wasm)
package testengine

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/mandatevm/mandate/sandbox"
)

// Name is the engine the tests of this build run on: "wazero", or
// "wasmtime" when built with the tag "wasmtime".
func Name() string { return name }

// CacheDir is the compilation cache the tests' engines share across test
// binaries, one per engine, so each guest is compiled once per machine.
func CacheDir() string {
	return filepath.Join(os.TempDir(), "mandate-test-"+name+"-cache")
}

// New starts the engine under test with the shared cache and closes it when
// the test ends.
func New(t testing.TB) sandbox.Engine {
	t.Helper()
	ctx := context.Background()
	eng, err := newEngine(ctx, sandbox.Config{CacheDir: CacheDir()})
	if err != nil {
		t.Fatalf("starting the %s engine: %v", name, err)
	}
	t.Cleanup(func() { eng.Close(ctx) })
	return eng
}

// BuildFlags are the go build flags that build a binary with the engine
// under test, for tests that build cmd/mandate.
func BuildFlags() []string { return buildFlags }
