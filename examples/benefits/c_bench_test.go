package benefits_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/caps/data"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// BenchmarkBenefitsTask starts and runs one task of the benefits desk
// (alice's query: her own record) per iteration, with the Go tool and
// with its C port, on this build's engine (go test -bench; -tags wasmtime
// for wasmtime). It reports each module's size ("wasm-bytes"). The kernel,
// store and compiled module are made once; an iteration is the task:
// instantiation, the host calls, the result.
func BenchmarkBenefitsTask(b *testing.B) {
	for _, g := range []struct{ name, dir string }{{"go", "guest"}, {"c", "guest-c"}} {
		b.Run(g.name, func(b *testing.B) {
			if g.name == "c" {
				needC(b)
			}
			ctx := context.Background()
			wasm, _, err := guestbuild.Build(ctx, g.dir, guestbuild.Options{})
			if err != nil {
				b.Fatal(err)
			}
			st, err := data.Open(filepath.Join(b.TempDir(), "data.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			f, err := os.Open(filepath.Join("data", "benefits.json"))
			if err != nil {
				b.Fatal(err)
			}
			recs, err := data.ParseJSON(f)
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
			if _, err := st.Import(ctx, "benefits", recs, data.ImportOptions{}); err != nil {
				b.Fatal(err)
			}
			eng := testengine.New(b)
			k, err := kernel.New(kernel.Config{Engine: eng, Kinds: []kindapi.Kind{data.New(st)}})
			if err != nil {
				b.Fatal(err)
			}
			scope, err := k.Grant("data", kindapi.GrantContext{},
				[]byte(`{"collection":"benefits","records":"own","fields":["plan","dental","vision","deductible_left"],"ops":["read","query"]}`))
			if err != nil {
				b.Fatal(err)
			}
			mod, err := eng.Compile(ctx, wasm)
			if err != nil {
				b.Fatal(err)
			}
			defer mod.Close(ctx)
			spec := kernel.TaskSpec{
				Module: mod, Principal: "alice",
				Grants: []kernel.GrantSpec{{Name: "benefits", Kind: "data", Scope: scope}},
				Limits: kernel.Limits{Timeout: time.Minute, Memory: 64 << 20},
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				task, err := k.Run(ctx, spec)
				if err != nil {
					b.Fatalf("run: %v\nstderr: %s", err, task.Stderr())
				}
				if i == 0 {
					if r, _ := task.Result(); !strings.Contains(string(r), "alice  plan=Gold PPO") {
						b.Fatalf("result %q", r)
					}
				}
			}
			b.ReportMetric(float64(len(wasm)), "wasm-bytes") // after ResetTimer, which clears it
		})
	}
}
