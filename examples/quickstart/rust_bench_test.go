package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/constraint"
	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/manifest"
)

// BenchmarkQuickstartTask measures one quickstart task, the Go guest's and
// the Rust guest's, on the engine of this build: a kernel task with the
// manifest's one grant, from a compiled module (instantiate, the
// language's runtime start, the guest's six fetches and derives against a
// loopback server, close). It reports the module's size.
//
//	go test ./examples/quickstart -run '^$' -bench QuickstartTask
//	go test -tags wasmtime ./examples/quickstart -run '^$' -bench QuickstartTask
func BenchmarkQuickstartTask(b *testing.B) {
	b.Run("go", func(b *testing.B) { benchQuickstartTask(b, "quickstart.hcl") })
	b.Run("rust", func(b *testing.B) {
		needRust(b)
		benchQuickstartTask(b, "quickstart-rust.hcl")
	})
}

func benchQuickstartTask(b *testing.B, manifestName string) {
	ctx := context.Background()
	flights := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "3 flights %s -> %s (API key accepted)\n", r.URL.Query().Get("from"), r.URL.Query().Get("to"))
	}))
	defer flights.Close()
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.Errorf("the evil origin got %s", r.URL)
	}))
	defer evil.Close()
	b.Setenv("QUICKSTART_FLIGHTS_TOKEN", token)

	m, err := manifest.Load(manifestName, map[string]string{"origin": flights.URL})
	if err != nil {
		b.Fatal(err)
	}
	wasm, _, err := guestbuild.Build(ctx, m.ModulePath, guestbuild.Options{})
	if err != nil {
		b.Fatal(err)
	}
	eng := testengine.New(b)
	kinds, closeKinds := host.Kinds(filepath.Join(b.TempDir(), "state"))
	defer closeKinds()
	k, err := kernel.New(kernel.Config{Engine: eng, Kinds: kinds, Constraints: constraint.New()})
	if err != nil {
		b.Fatal(err)
	}
	grants, err := m.Grants(k)
	if err != nil {
		b.Fatal(err)
	}
	mod, err := eng.Compile(ctx, wasm)
	if err != nil {
		b.Fatal(err)
	}
	spec := kernel.TaskSpec{
		Module: mod, Principal: m.Principal, Name: m.Name, Limits: m.Limits(),
		Grants: grants, Input: []byte(evil.URL),
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		task, err := k.Run(ctx, spec)
		if err != nil {
			b.Fatalf("%v\n%s", err, task.Stderr())
		}
		if r, _ := task.Result(); !strings.Contains(string(r), "after revocation: EREVOKED") {
			b.Fatalf("result %q", r)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(len(wasm)), "module-bytes")
}
