package wazero

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/sandboxtest"
)

// hits counts the modules compiled from their prepared records.
func hits(t *testing.T) func() []string {
	var mu sync.Mutex
	var got []string
	preparedHit = func(d string) {
		mu.Lock()
		got = append(got, d)
		mu.Unlock()
	}
	t.Cleanup(func() { preparedHit = nil })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// runHello runs the hello command and checks what it wrote.
func runHello(t *testing.T, mod sandbox.Module) {
	t.Helper()
	var out bytes.Buffer
	if err := mod.Run(context.Background(), sandbox.RunConfig{Name: "hello", Stdout: &out, MemoryLimit: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "hello") {
		t.Fatalf("stdout %q", out.String())
	}
}

// TestPreparedRecord: a command compiled once is compiled by the next
// engine on the cache directory from its record (no rewrite), runs as it
// did, and has its static limits checked from the record; a damaged
// record is not used, and is written again.
func TestPreparedRecord(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	wasm := sandboxtest.Guest("hello")
	digest := sandbox.Digest(wasm)
	hit := hits(t)

	e1, _ := snapshotEngine(t, sandbox.Config{CacheDir: dir})
	mod, err := e1.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	runHello(t, mod)
	if n := len(hit()); n != 0 {
		t.Fatalf("%d hits on a new cache directory", n)
	}
	path := e1.preparedPath(digest)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no record: %v", err)
	}

	e2, _ := snapshotEngine(t, sandbox.Config{CacheDir: dir})
	// Static limits, from the record.
	if _, err := e2.CompileWith(ctx, wasm, sandbox.CompileConfig{Limits: sandbox.StaticLimits{Functions: 1}}); !errors.Is(err, sandbox.ErrStaticLimit) {
		t.Fatalf("a limit of one function: %v, want ErrStaticLimit", err)
	}
	mod2, err := e2.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	runHello(t, mod2)
	if got := hit(); len(got) != 1 || got[0] != digest {
		t.Fatalf("hits %v, want the module's one", got)
	}
	if mod2.Kind() != sandbox.Command {
		t.Errorf("kind %v from the record", mod2.Kind())
	}

	// A flipped bit in the code: not used, prepared again, written again.
	bad := bytes.Clone(good)
	bad[len(bad)-100] ^= 1
	if err := os.WriteFile(path, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	e3, _ := snapshotEngine(t, sandbox.Config{CacheDir: dir})
	mod3, err := e3.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	runHello(t, mod3)
	if n := len(hit()); n != 1 {
		t.Fatalf("a damaged record was used (%d hits)", n)
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, good) {
		t.Fatalf("the record was not written again (%v)", err)
	}

	// Another engine setting has a record of its own.
	e4, err := newEngine(ctx, sandbox.Config{CacheDir: dir}, options{preemptBudget: 77})
	if err != nil {
		t.Fatal(err)
	}
	defer e4.Close(ctx)
	if e4.preparedPath(digest) == path {
		t.Fatal("another preemption budget has the same record")
	}
}

// TestPreparedSnapshot: a reactor's record is written once its snapshot
// is settled, and an engine compiling from it starts from the snapshot.
func TestPreparedSnapshot(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	wasm := sandboxtest.Guest("reactor")
	hit := hits(t)

	e1, h1 := snapshotEngine(t, sandbox.Config{CacheDir: dir})
	mod, err := e1.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	if err := mod.Run(ctx, sandbox.RunConfig{Entry: "run", MemoryLimit: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	if used, why := sandboxtest.Settled(t, mod); !used {
		t.Fatalf("no snapshot: %s", why)
	}
	if _, err := os.Stat(e1.preparedPath(sandbox.Digest(wasm))); !os.IsNotExist(err) {
		t.Fatalf("a record of a form not settled when compiled: %v", err)
	}
	// The next engine compiles from the snapshot, settled: the record.
	e2, _ := snapshotEngine(t, sandbox.Config{CacheDir: dir})
	if _, err := e2.Compile(ctx, wasm); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(e2.preparedPath(sandbox.Digest(wasm))); err != nil {
		t.Fatalf("no record of the settled form: %v", err)
	}
	e3, h3 := snapshotEngine(t, sandbox.Config{CacheDir: dir})
	mod3, err := e3.Compile(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(hit()); n != 1 {
		t.Fatalf("%d hits, want 1", n)
	}
	if used, why := mod3.(*Module).Snapshot(); !used {
		t.Fatalf("the record's form is not the snapshot: %s", why)
	}
	for i := range 2 {
		if err := mod3.Run(ctx, sandbox.RunConfig{Entry: "run", MemoryLimit: 64 << 20}); err != nil {
			t.Fatalf("run %d from the record: %v", i, err)
		}
	}
	if n, n1 := len(h3.Calls()), len(h1.Calls()); n != 2 || n1 != 1 {
		t.Errorf("host calls %d (want 2: one per run, none from init), first engine %d", n, n1)
	}
}
