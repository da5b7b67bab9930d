package sandboxtest

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"

	"github.com/tetratelabs/wazero"

	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/sandbox"
)

// LargestGuest builds the repository's largest Go guest
// (internal/cli/testdata/guests/cli-guest, about 10 MB of WebAssembly).
func LargestGuest() ([]byte, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return nil, errors.New("sandboxtest: cannot locate the repository")
	}
	dir := filepath.Join(filepath.Dir(file), "..", "..", "internal", "cli", "testdata", "guests", "cli-guest")
	wasm, _, err := guestbuild.Build(context.Background(), dir, guestbuild.Options{})
	return wasm, err
}

// StubHosts registers on e, for every host module wasm imports (all but
// wasi_snapshot_preview1), functions of the right arity that return 0, so
// that e compiles wasm. It lists the imports with wazero's interpreter.
func StubHosts(e sandbox.Engine, wasm []byte) error {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	cm, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		return err
	}
	hosts := map[string][]sandbox.HostFunc{}
	var order []string
	for _, def := range cm.ImportedFunctions() {
		mod, name, _ := def.Import()
		if mod == "wasi_snapshot_preview1" {
			continue
		}
		if hosts[mod] == nil {
			order = append(order, mod)
		}
		hosts[mod] = append(hosts[mod], sandbox.HostFunc{
			Name:   name,
			Params: sandbox.Values(len(def.ParamTypes())),
			Fn:     func(_ context.Context, _ sandbox.Memory, stack []uint64) { stack[0] = 0 },
		})
	}
	for _, mod := range order {
		if err := e.Host(mod, hosts[mod]); err != nil {
			return err
		}
	}
	return nil
}
