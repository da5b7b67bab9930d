package sandboxtest

import (
	"context"
	"os"
	"testing"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/internal/isolate"
)

// BenchCompileIsolated measures a compile in process, out of process on a
// cache miss, and a cache hit (which must start no child), for a small
// hand-assembled module and the largest Go guest. newEngine starts an
// engine with cfg that compiles in process when inProcess is set; the
// benchmark closes it.
func BenchCompileIsolated(b *testing.B, newEngine func(cfg sandbox.Config, inProcess bool) (sandbox.Engine, error)) {
	largest, err := LargestGuest()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	compile := func(b *testing.B, cfg sandbox.Config, inProcess bool, wasm []byte) {
		e, err := newEngine(cfg, inProcess)
		if err != nil {
			b.Fatal(err)
		}
		defer e.Close(ctx)
		if err := StubHosts(e, wasm); err != nil {
			b.Fatal(err)
		}
		m, err := e.Compile(ctx, wasm)
		if err != nil {
			b.Fatal(err)
		}
		m.Close(ctx)
	}
	for _, mod := range []struct {
		name string
		wasm []byte
	}{{"small", SpinModule()}, {"largest", largest}} {
		b.Run(mod.name+"/in-process", func(b *testing.B) {
			for b.Loop() {
				compile(b, sandbox.Config{NoSnapshots: true}, true, mod.wasm)
			}
		})
		b.Run(mod.name+"/child-miss", func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				dir, err := os.MkdirTemp("", "bench-cache-*")
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				compile(b, sandbox.Config{CacheDir: dir, NoSnapshots: true}, false, mod.wasm)
				b.StopTimer()
				os.RemoveAll(dir)
				b.StartTimer()
			}
		})
		b.Run(mod.name+"/hit", func(b *testing.B) {
			dir := b.TempDir()
			compile(b, sandbox.Config{CacheDir: dir, NoSnapshots: true}, false, mod.wasm)
			started := isolate.Started()
			for b.Loop() {
				compile(b, sandbox.Config{CacheDir: dir, NoSnapshots: true}, false, mod.wasm)
			}
			if n := isolate.Started() - started; n != 0 {
				b.Fatalf("cache hits started %d children", n)
			}
		})
	}
}
