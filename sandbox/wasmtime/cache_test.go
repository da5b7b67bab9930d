//go:build wasmtime

package wasmtime

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/internal/wasmbin"
	"github.com/mandatevm/mandate/sandbox/sandboxtest"
)

// TestStaticCountsKept: a module's static counts are kept in the cache
// and the next engine checks its limits against them without counting
// again; a damaged or another build's file is not used.
func TestStaticCountsKept(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	wasm := sandboxtest.TableGrowModule(1)
	digest := sandbox.Digest(wasm)
	e1 := newTestEngine(t, sandbox.Config{CacheDir: dir}, options{})
	if _, err := e1.Compile(ctx, wasm); err != nil {
		t.Fatal(err)
	}
	path := strings.TrimSuffix(e1.cache.path(digest), ".cwasm") + ".stats"
	kept, ok := e1.cache.stats(digest)
	if !ok {
		t.Fatal("no counts kept")
	}
	m, err := wasmbin.Parse(wasm)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := wasmbin.Static(wasm, m); kept != want {
		t.Fatalf("kept %+v, want %+v", kept, want)
	}
	e2 := newTestEngine(t, sandbox.Config{CacheDir: dir}, options{})
	if _, err := e2.CompileWith(ctx, wasm, sandbox.CompileConfig{Limits: sandbox.StaticLimits{Functions: kept.Functions}}); err != nil {
		t.Fatalf("within the limit: %v", err)
	}
	// Counts that say more functions than the module has are believed
	// (what keeping them is for).
	more := kept
	more.Functions = 1 << 20
	e2.cache.storeStats(digest, more)
	e3 := newTestEngine(t, sandbox.Config{CacheDir: dir}, options{})
	if _, err := e3.Compile(ctx, wasm); !errors.Is(err, sandbox.ErrStaticLimit) {
		t.Fatalf("kept counts past the limit: %v, want ErrStaticLimit", err)
	}
	// Another build's counts, or a damaged file: counted again.
	b, _ := json.Marshal(statsFile{Stamp: "another build", Stats: more})
	if err := e2.cache.writeFile(path, b); err != nil {
		t.Fatal(err)
	}
	if _, err := newTestEngine(t, sandbox.Config{CacheDir: dir}, options{}).Compile(ctx, wasm); err != nil {
		t.Fatalf("another build's counts were used: %v", err)
	}
	if got, ok := e2.cache.stats(digest); !ok || got != kept {
		t.Fatalf("the counts were not kept again: %+v %v", got, ok)
	}
	e2.cache.storeStats(digest, more)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(raw), "1048576")
	if i < 0 {
		t.Fatalf("the counts are not in the file: %q", raw)
	}
	raw[i+6] = '7' // still counts past the limit, if they were believed
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := newTestEngine(t, sandbox.Config{CacheDir: dir}, options{}).Compile(ctx, wasm); err != nil {
		t.Fatalf("a damaged file's counts were used: %v", err)
	}
}
