// Package natstest starts embedded NATS servers with JetStream for tests:
// one with Start, a cluster with StartCluster. Each is stopped when the test
// ends.
//
//	srv := natstest.Start(t)
//	nc, err := nats.Connect(srv.ClientURL())
package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mandatevm/mandate/internal/natsembed"
)

// Timeout bounds starting a server and waiting for JetStream; generous, for a
// loaded machine.
const Timeout = 2 * time.Minute

// Option changes the natsembed.Config of each server started.
type Option func(*natsembed.Config)

// WithUsers makes the servers accept only users (see natsembed.User and
// natsembed.JetStreamUser).
func WithUsers(users ...natsembed.User) Option {
	return func(c *natsembed.Config) { c.Users = append(c.Users, users...) }
}

// WithLogger sends the servers' log lines to l.
func WithLogger(l hclog.Logger) Option {
	return func(c *natsembed.Config) { c.Logger = l }
}

// Start starts one server with JetStream, its store in t.TempDir(), on a
// random loopback port, and waits until JetStream is ready. It is shut down
// when the test ends.
func Start(t testing.TB, opts ...Option) *natsembed.Server {
	t.Helper()
	cfg := natsembed.Config{StoreDir: t.TempDir()}
	for _, o := range opts {
		o(&cfg)
	}
	return start(t, cfg)
}

// start starts cfg's server, registers its shutdown and waits until it is
// ready.
func start(t testing.TB, cfg natsembed.Config) *natsembed.Server {
	t.Helper()
	srv := startOnly(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := srv.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return srv
}

// startOnly starts cfg's server and registers its shutdown, without waiting
// for JetStream.
func startOnly(t testing.TB, cfg natsembed.Config) *natsembed.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	srv, err := natsembed.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}
