package host_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/manifest"
)

// BenchmarkRun: one run of the benefits desk (examples/benefits/alice.hcl)
// per iteration on one host, from Start to its recorded end: the module
// read, its digest checked, the kernel made, the data store seeded, the
// task run and the run recorded. The host compiles the module once, in
// the first run, before the timer starts.
//
//	go test ./host -run '^$' -bench 'Run$' -benchtime 50x -count 3
func BenchmarkRun(b *testing.B) {
	ctx := context.Background()
	m, err := manifest.Load(filepath.Join("..", "examples", "benefits", "alice.hcl"), nil)
	if err != nil {
		b.Fatal(err)
	}
	h, err := host.Open(ctx, host.Options{StateDir: b.TempDir(), CacheDir: testCache()})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	run := func() {
		r, err := h.Start(ctx, host.RunSpec{Manifest: m})
		if err != nil {
			b.Fatal(err)
		}
		out, err := r.Wait(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if out.Exit != host.ExitOK || !strings.Contains(string(out.Result), "alice  plan=Gold PPO") {
			b.Fatalf("exit %d, %v, result %q", out.Exit, out.Err, out.Result)
		}
	}
	run()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		run()
	}
}
