package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/fleet"
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
