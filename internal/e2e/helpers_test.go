package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mandatevm/mandate/fleet"
	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/guestbuild"
)

// testCache is the cache root the tests share (see internal/cli).
func testCache() string { return filepath.Dir(guestbuild.DefaultCacheDir()) }

// connectFleet connects to NATS and ensures the fleet's streams.
func connectFleet(t *testing.T, urls string, replicas int) *fleet.Fleet {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc, f, err := fleet.Connect(ctx, urls, replicas)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return f
}

// fetchManifest writes a manifest and its module (testdata's cli-guest,
// built) into one folder, as a fleet run carries them, and returns the
// manifest's path: one net capability, GET under /search on var.origin.
func fetchManifest(t *testing.T, ctx context.Context) string {
	t.Helper()
	dir := t.TempDir()
	wasm, err := host.BuildGuest(ctx, "../cli/testdata/guests/cli-guest", false, testCache())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "guest.wasm"), wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "fetch.hcl")
	if err := os.WriteFile(path, []byte(`task "fetch" {
  module    = "guest.wasm"
  principal = "alice"
  cap "net" "web" {
    origin        = var.origin
    methods       = ["GET"]
    paths         = ["/search"]
    allow_private = true
  }
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
