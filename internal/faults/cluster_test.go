//go:build unix

package faults

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/internal/natsembed"
)

// cluster is natstest.StartCluster's cluster with each server in its own
// process (testdata/natsd), so that a server can be killed as well as
// stopped. natsembed's Shutdown is graceful: the streams' leaders on the
// server step down first, and the others take over at once (the nodes'
// heartbeats went on with no gap over 0.5 s when natstest stopped the
// heartbeat stream's leader). A killed server's leadership is taken only
// by an election, as when a machine dies.
type cluster struct {
	t    testing.TB
	bin  string
	cfgs []natsembed.Config

	mu    sync.Mutex
	procs []*exec.Cmd // nil while stopped
	done  []chan struct{}
	logs  []*kerneltest.Buffer
}

// startCluster starts n servers, n0, n1, ..., routed to each other, with
// users, and waits until each is ready.
func startCluster(t testing.TB, n int, users []natsembed.User) *cluster {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "natsd")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/natsd").CombinedOutput(); err != nil {
		t.Fatalf("building testdata/natsd: %v\n%s", err, out)
	}
	ports := freePorts(t, 2*n)
	secret := make([]byte, 16)
	rand.Read(secret)
	c := &cluster{t: t, bin: bin, procs: make([]*exec.Cmd, n), done: make([]chan struct{}, n)}
	for i := range n {
		var peers []string
		for j := range n {
			if j != i {
				peers = append(peers, "nats://"+net.JoinHostPort(natsembed.DefaultHost, strconv.Itoa(ports[2*j+1])))
			}
		}
		c.cfgs = append(c.cfgs, natsembed.Config{
			Name: fmt.Sprintf("n%d", i), StoreDir: t.TempDir(), Port: ports[2*i], Users: users,
			Cluster: &natsembed.ClusterConfig{
				Name: "faults", Listen: net.JoinHostPort(natsembed.DefaultHost, strconv.Itoa(ports[2*i+1])),
				Peers: peers, Username: "route", Password: hex.EncodeToString(secret),
			},
		})
		c.logs = append(c.logs, &kerneltest.Buffer{})
	}
	// Start them all before waiting on any: each waits for the others.
	var ready []chan error
	for i := range n {
		ready = append(ready, c.startProc(i))
	}
	for i, r := range ready {
		if err := c.wait(i, r); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for i := range n {
			c.signal(i, syscall.SIGKILL)
		}
	})
	return c
}

// startProc starts server i's process; the channel says when it is ready.
func (c *cluster) startProc(i int) chan error {
	c.t.Helper()
	cfg, _ := json.Marshal(c.cfgs[i])
	cmd := exec.Command(c.bin, string(cfg))
	cmd.Stderr = c.logs[i]
	out, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	fmt.Fprintf(c.logs[i], "=== %s started\n", c.cfgs[i].Name)
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	done := make(chan struct{})
	ready := make(chan error, 2)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- nil
			}
		}
		err := cmd.Wait()
		ready <- fmt.Errorf("%s exited before it was ready: %v\n%s", c.cfgs[i].Name, err, c.logs[i])
		close(done)
	}()
	c.mu.Lock()
	c.procs[i], c.done[i] = cmd, done
	c.mu.Unlock()
	return ready
}

// wait waits for server i to be ready, as natstest does (2 minutes).
func (c *cluster) wait(i int, ready chan error) error {
	select {
	case err := <-ready:
		return err
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("%s not ready after 2 minutes\n%s", c.cfgs[i].Name, c.logs[i])
	}
}

// signal sends sig to server i and waits until it has exited (nothing when
// it is not running).
func (c *cluster) signal(i int, sig syscall.Signal) {
	c.mu.Lock()
	cmd, done := c.procs[i], c.done[i]
	c.procs[i] = nil
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
	}
}

// Stop stops server i as natstest.Cluster.Stop does (natsembed's Shutdown).
func (c *cluster) Stop(i int) { c.signal(i, syscall.SIGTERM) }

// Kill kills server i's process.
func (c *cluster) Kill(i int) { c.signal(i, syscall.SIGKILL) }

// Restart starts server i again, with its store and ports, and waits until
// it is ready.
func (c *cluster) Restart(i int) {
	c.t.Helper()
	c.signal(i, syscall.SIGKILL)
	if err := c.wait(i, c.startProc(i)); err != nil {
		c.t.Fatal(err)
	}
}

// URLs are the client URLs of all the servers, in order.
func (c *cluster) URLs() []string {
	var urls []string
	for _, cfg := range c.cfgs {
		urls = append(urls, "nats://"+net.JoinHostPort(natsembed.DefaultHost, strconv.Itoa(cfg.Port)))
	}
	return urls
}

// Name is server i's name.
func (c *cluster) Name(i int) string { return c.cfgs[i].Name }

// Index is the index of the server named name, or -1.
func (c *cluster) Index(name string) int {
	for i, cfg := range c.cfgs {
		if cfg.Name == name {
			return i
		}
	}
	return -1
}

// Logs are what the servers logged (warnings and errors), but a stopped
// peer's refused routes.
func (c *cluster) Logs() string {
	var b strings.Builder
	for _, l := range c.logs {
		for _, line := range strings.SplitAfter(l.String(), "\n") {
			if !strings.Contains(line, "Error trying to connect to route") {
				b.WriteString(line)
			}
		}
	}
	return b.String()
}

// freePorts returns n distinct loopback ports that were free a moment ago.
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
