package natstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/mandatevm/mandate/internal/natsembed"
)

// Cluster is a cluster of servers started by StartCluster. Its methods call
// t.Fatal, so they belong on the test's goroutine.
type Cluster struct {
	t    testing.TB
	cfgs []natsembed.Config // fixed at StartCluster: stores, ports, peers

	mu      sync.Mutex
	servers []*natsembed.Server // protected by mu; nil while stopped
}

// StartCluster starts n servers with JetStream, named n0, n1, ..., on free
// loopback ports, each routing to all the others (with a route password made
// for the cluster), and waits until each is ready (natsembed.Server.WaitReady:
// a stream with Replicas min(3, n) can be created). They are shut down when
// the test ends.
func StartCluster(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("StartCluster(%d): want at least one server", n)
	}
	ports := freePorts(t, 2*n)
	routes := make([]string, n)
	for i := range n {
		routes[i] = "nats://" + net.JoinHostPort(natsembed.DefaultHost, strconv.Itoa(ports[2*i+1]))
	}
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, servers: make([]*natsembed.Server, n)}
	for i := range n {
		var peers []string
		for j, r := range routes {
			if j != i {
				peers = append(peers, r)
			}
		}
		cfg := natsembed.Config{
			Name:     fmt.Sprintf("n%d", i),
			StoreDir: t.TempDir(),
			Port:     ports[2*i],
			Cluster: &natsembed.ClusterConfig{
				Name:     "natstest",
				Listen:   net.JoinHostPort(natsembed.DefaultHost, strconv.Itoa(ports[2*i+1])),
				Peers:    peers,
				Username: "route",
				Password: hex.EncodeToString(secret),
			},
		}
		for _, o := range opts {
			o(&cfg)
		}
		c.cfgs = append(c.cfgs, cfg)
	}
	// Start them all before waiting on any: each waits for the others.
	for i, cfg := range c.cfgs {
		c.servers[i] = startOnly(t, cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	for _, s := range c.servers {
		if err := s.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// URLs are the client URLs of all the servers, running or stopped, in order.
func (c *Cluster) URLs() []string {
	urls := make([]string, len(c.cfgs))
	for i, cfg := range c.cfgs {
		urls[i] = "nats://" + net.JoinHostPort(natsembed.DefaultHost, strconv.Itoa(cfg.Port))
	}
	return urls
}

// Server returns server i, or nil while it is stopped.
func (c *Cluster) Server(i int) *natsembed.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servers[i]
}

// Stop shuts server i down and waits until it has stopped. Stopping a stopped
// server does nothing.
func (c *Cluster) Stop(i int) {
	c.mu.Lock()
	s := c.servers[i]
	c.servers[i] = nil
	c.mu.Unlock()
	if s != nil {
		s.Shutdown()
	}
}

// Restart stops server i if it is running, starts it again with the same
// store and ports, and waits until it is ready, which includes having caught
// up with the meta leader. Its streams may still be catching up.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	c.Stop(i)
	s := start(c.t, c.cfgs[i])
	c.mu.Lock()
	c.servers[i] = s
	c.mu.Unlock()
}

// freePorts returns n distinct loopback ports that were free a moment ago.
// Another process may take one before the server does; in a test that is rare
// enough, and Start then fails with the listen error.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(natsembed.DefaultHost, "0"))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
