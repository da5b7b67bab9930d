package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/fleet"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// testCache is the cache root the tests share (see internal/cli).
func testCache() string { return filepath.Dir(guestbuild.DefaultCacheDir()) }

// connectFleet connects to NATS and ensures the fleet's streams.
func connectFleet(t *testing.T, urls string, replicas int) *fleet.Fleet {
	t.Helper()
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f, err := fleet.Ensure(ctx, js, replicas)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
