package host_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/manifest"
	"github.com/mandatevm/mandate/sandbox"
)

// TestPinHoldsForRewrittenModule: a manifest's digest pin holds while the
// module file's digest is kept between runs (digestcache.go): a file
// rewritten in place with other bytes of the same size, its modification
// time set back, is refused, and run again once it is what the pin says.
func TestPinHoldsForRewrittenModule(t *testing.T) {
	t.Cleanup(host.SetRacyWindowForTest(0))
	dir := t.TempDir()
	leaf := filepath.Join(dir, "leaf.wasm")
	good := leafModule()
	// The same module with a memory of two pages: the same size.
	bad := leafModule()
	i := strings.Index(string(bad), "\x05\x03\x01\x00\x01")
	if i < 0 {
		t.Fatal("no memory section in the leaf module")
	}
	bad[i+4] = 2
	if len(bad) != len(good) || string(bad) == string(good) {
		t.Fatal("the two modules are not different bytes of one size")
	}
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	write := func(b []byte) {
		t.Helper()
		if err := os.WriteFile(leaf, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(leaf, old, old); err != nil {
			t.Fatal(err)
		}
	}
	write(good)
	m, err := manifest.Parse([]byte("task \"t\" {\n  module    = \"leaf.wasm\"\n  digest    = \""+sandbox.Digest(good)+"\"\n  principal = \"alice\"\n}\n"), filepath.Join(dir, "t.hcl"), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(context.Background(), host.Options{StateDir: t.TempDir(), CacheDir: t.TempDir(), Engine: testengine.Name()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	for i := range 2 { // the second from the digest kept
		if out := runOnce(t, h, m, ""); out.Exit != host.ExitOK || out.Record.Run.Digest != sandbox.Digest(good) {
			t.Fatalf("run %d of the pinned module: exit %d, %v, digest %s", i, out.Exit, out.Err, out.Record.Run.Digest)
		}
	}
	write(bad)
	_, err = h.Start(context.Background(), host.RunSpec{Manifest: m})
	if err == nil || !strings.Contains(err.Error(), "has digest "+sandbox.Digest(bad)) {
		t.Fatalf("the rewritten module: %v, want the pin's refusal naming its digest", err)
	}
	write(good)
	if out := runOnce(t, h, m, ""); out.Exit != host.ExitOK {
		t.Fatalf("the pinned module again: exit %d, %v", out.Exit, out.Err)
	}
}

// digestEngine is an engine that takes the digest from its caller, noting
// each one it got with the digest of the bytes it came with.
type digestEngine struct {
	sandbox.Engine
	got chan [2]string
}

func (e *digestEngine) CompileDigest(ctx context.Context, wasm []byte, digest string, cfg sandbox.CompileConfig) (sandbox.Module, error) {
	e.got <- [2]string{digest, sandbox.Digest(wasm)}
	return e.Engine.CompileWith(ctx, wasm, cfg)
}

// TestEngineGetsTheDigest: an engine that takes the module's digest from
// the host gets the module's, for the module it compiles, whether the host
// hashed the file or took the digest from its record.
func TestEngineGetsTheDigest(t *testing.T) {
	t.Cleanup(host.SetRacyWindowForTest(0))
	got := make(chan [2]string, 4)
	host.AddEngineForTest("digest", func(ctx context.Context, _ string) (sandbox.Engine, error) {
		inner, err := host.NewEngine(ctx, testengine.Name(), testengine.CacheDir())
		if err != nil {
			return nil, err
		}
		return &digestEngine{Engine: inner, got: got}, nil
	})
	dir, cache := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "leaf.wasm"), leafModule(), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Parse([]byte("task \"t\" {\n  module    = \"leaf.wasm\"\n  principal = \"alice\"\n}\n"), filepath.Join(dir, "t.hcl"), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // hashed, then from the record, on a new host each
		h, err := host.Open(context.Background(), host.Options{StateDir: t.TempDir(), CacheDir: cache, Engine: "digest"})
		if err != nil {
			t.Fatal(err)
		}
		if out := runOnce(t, h, m, ""); out.Exit != host.ExitOK {
			t.Fatalf("run %d: exit %d, %v", i, out.Exit, out.Err)
		}
		h.Close()
		select {
		case d := <-got:
			if d[0] != sandbox.Digest(leafModule()) || d[0] != d[1] {
				t.Fatalf("run %d: the engine got digest %s for a module of digest %s", i, d[0], d[1])
			}
		default:
			t.Fatalf("run %d: the engine was not given the digest", i)
		}
	}
}
