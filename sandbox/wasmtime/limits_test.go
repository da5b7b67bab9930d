//go:build wasmtime

package wasmtime

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/sandboxtest"
)

// TestTableLimit grows a table to exactly MaxTableElements, and one past.
func TestTableLimit(t *testing.T) {
	e := newTestEngine(t, sandbox.Config{}, options{})
	ctx := context.Background()
	for _, tt := range []struct {
		n        int32
		wantCode uint32 // 1: grown from 0; 0: refused
	}{
		{MaxTableElements, 1},
		{MaxTableElements + 1, 0},
		{1<<31 - 1, 0},
	} {
		m, err := e.Compile(ctx, sandboxtest.TableGrowModule(tt.n))
		if err != nil {
			t.Fatal(err)
		}
		err = m.Run(ctx, sandbox.RunConfig{Timeout: time.Minute})
		var ee *sandbox.ExitError
		switch {
		case tt.wantCode == 0 && err != nil:
			t.Errorf("table.grow %d = %v, want refused (nil)", tt.n, err)
		case tt.wantCode != 0 && (!errors.As(err, &ee) || ee.Code != tt.wantCode):
			t.Errorf("table.grow %d = %v, want *ExitError{Code: %d}", tt.n, err, tt.wantCode)
		}
		m.Close(ctx)
	}
}

// TestMemoryView checks the host's view of guest memory bounds-checks.
func TestMemoryView(t *testing.T) {
	m := &memory{b: make([]byte, 16)}
	if _, ok := m.Read(8, 9); ok {
		t.Error("Read past the end succeeded")
	}
	if _, ok := m.Read(1<<32-1, 2); ok {
		t.Error("Read wrapping around succeeded")
	}
	if b, ok := m.Read(8, 8); !ok || len(b) != 8 || cap(b) != 8 {
		t.Errorf("Read(8, 8) = %d/%d bytes, %v", len(b), cap(b), ok)
	}
	if m.Write(15, []byte{1, 2}) || !m.Write(14, []byte{1, 2}) {
		t.Error("Write bounds wrong")
	}
	if _, ok := m.ReadUint32Le(13); ok {
		t.Error("ReadUint32Le past the end succeeded")
	}
	if !m.WriteUint32Le(12, 0xdeadbeef) {
		t.Error("WriteUint32Le(12) failed")
	}
	if v, ok := m.ReadUint32Le(12); !ok || v != 0xdeadbeef {
		t.Errorf("ReadUint32Le(12) = %#x, %v", v, ok)
	}
	if m.Size() != 16 {
		t.Errorf("Size() = %d, want 16", m.Size())
	}
	var empty memory
	if _, ok := empty.Read(0, 1); ok || empty.Size() != 0 {
		t.Error("empty memory is not empty")
	}
	if _, ok := empty.Read(0, 0); !ok {
		t.Error("Read(0, 0) of an empty memory failed")
	}
}

// TestCacheKey checks that the cache directory changes with the version
// and the settings, and that a file from another setting is never read.
func TestCacheKey(t *testing.T) {
	a := cacheKey("v39.0.1", "preempt=epoch")
	for _, other := range []string{cacheKey("v39.0.2", "preempt=epoch"), cacheKey("v39.0.1", "preempt=fuel")} {
		if other == a {
			t.Errorf("cache key %s does not change", a)
		}
	}
	gomod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if want := wasmtimeGoModule + " " + wasmtimeGoVersion; !strings.Contains(string(gomod), want) {
		t.Errorf("go.mod does not require %s: update wasmtimeGoVersion in cache.go", want)
	}

	dir := t.TempDir()
	ctx := context.Background()
	wasm := sandboxtest.TableGrowModule(1)
	epoch := newTestEngine(t, sandbox.Config{CacheDir: dir}, options{})
	if _, err := epoch.Compile(ctx, wasm); err != nil {
		t.Fatal(err)
	}
	none := newTestEngine(t, sandbox.Config{CacheDir: dir}, options{preempt: preemptNone})
	if _, err := none.Compile(ctx, wasm); err != nil {
		t.Fatal(err)
	}
	dirs, _ := filepath.Glob(filepath.Join(dir, "wasmtime-*"))
	if len(dirs) != 2 {
		t.Errorf("cache dirs for two settings: %v, want 2", dirs)
	}
	// No temporary file is left behind.
	tmps, _ := filepath.Glob(filepath.Join(dir, "*", ".tmp-*"))
	if len(tmps) != 0 {
		t.Errorf("temporary files left: %v", tmps)
	}
}

// TestCacheFileChecked damages the payload of a cache file behind a valid
// header: the checksum catches it.
func TestCacheFileChecked(t *testing.T) {
	payload := []byte("compiled code")
	e := newTestEngine(t, sandbox.Config{CacheDir: t.TempDir()}, options{})
	ctx := context.Background()
	if _, err := e.Compile(ctx, sandboxtest.TableGrowModule(1)); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(e.cache.dir, "*.cwasm"))
	if len(files) != 1 {
		t.Fatalf("cache files: %v, want 1", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := unwrapCacheFile(b); !ok {
		t.Fatal("a file the engine wrote does not check out")
	}
	b[len(b)-1] ^= 1
	if _, ok := unwrapCacheFile(b); ok {
		t.Error("a damaged payload checks out")
	}
	if _, ok := unwrapCacheFile(append([]byte(cacheMagic), payload...)); ok {
		t.Error("a file without a checksum checks out")
	}
}

// TestCloseStopsRuns closes the engine under a spinning guest.
func TestCloseStopsRuns(t *testing.T) {
	ctx := context.Background()
	e, err := newEngine(ctx, sandbox.Config{CacheDir: testCacheDir}, options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.Compile(ctx, sandboxtest.Guest("spin"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, sandbox.RunConfig{}) }()
	time.Sleep(200 * time.Millisecond)
	e.Close(ctx)
	select {
	case err := <-done:
		if !errors.Is(err, sandbox.ErrCanceled) {
			t.Errorf("Run = %v, want ErrCanceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Close did not stop the run")
	}
	if err := m.Run(ctx, sandbox.RunConfig{}); err == nil {
		t.Error("Run after Close succeeded")
	}
	if _, err := e.Compile(ctx, sandboxtest.Guest("hello")); err == nil {
		t.Error("Compile after Close succeeded")
	}
}

// TestWASIStdioClosed checks which descriptors a guest that closed stdout
// still has.
func TestWASIStdioClosed(t *testing.T) {
	r := &run{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	r.closedFDs[1] = true
	if r.stdio(1) || !r.stdio(2) || r.stdio(3) {
		t.Errorf("stdio(1, 2, 3) = %v, %v, %v; want false, true, false", r.stdio(1), r.stdio(2), r.stdio(3))
	}
}
