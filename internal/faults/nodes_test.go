//go:build unix

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mandatevm/mandate/fleet"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/internal/testengine"
)

// The nodes' timing: a heartbeat every 500 ms and, for the scenarios that
// fault a node, a lease of 4 s (dead to the others 6 s after its last
// heartbeat). The scenarios that fault a NATS server run the nodes with
// the default lease (fleet.DefaultLease), which must outlast the
// cluster's elections: a 4 s lease cannot, and would fence every node.
const (
	heartbeat = 500 * time.Millisecond
	lostAfter = 4 * time.Second
	natsLease = fleet.DefaultLease
)

// testCache is the cache root the tests share (see internal/cli).
func testCache() string { return filepath.Dir(guestbuild.DefaultCacheDir()) }

// node is one "mandate node" (its name and state directory fixed; its
// process started again after a kill or a fence), each connection to the
// cluster through its own relays.
type node struct {
	name, state string
	logs        kerneltest.Buffer // every process's stderr, in order

	mu      sync.Mutex
	gen     int // processes started
	cmd     *exec.Cmd
	relays  []*relay
	started time.Time
	exited  chan struct{} // closed when the current process exits
	exitErr error
	exitAt  time.Time
	// expectExit: the scenario kills this process or cuts it off (it
	// fences itself and exits); an exit without it is a fault of the fleet.
	expectExit bool
	// restartOnExit: when the current process exits as expected (a
	// paused node that finds its lease lapsed), supervise starts it again.
	restartOnExit bool
	// reported: the current process's unexpected exit was reported.
	reported bool
}

// start starts n's process, with fresh relays to every server.
func (e *env) start(n *node) {
	e.t.Helper()
	var urls []string
	var relays []*relay
	for _, u := range e.cl.URLs() {
		r := startRelay(e.t, strings.TrimPrefix(u, "nats://"))
		relays = append(relays, r)
		urls = append(urls, (&url.URL{Scheme: "nats", User: url.UserPassword(n.name, n.name+"-secret"), Host: r.Addr()}).String())
	}
	cmd := exec.Command(e.bin, "node", "--nats", strings.Join(urls, ","), "--name", n.name, "--state-dir", n.state,
		"--cache-dir", testCache(), "--engine", testengine.Name(), "--heartbeat", heartbeat.String(),
		"--lost-after", e.lease.String(), "--replicas", "3", "--log-level", "info")
	cmd.Stderr = &n.logs
	n.mu.Lock()
	n.gen++
	fmt.Fprintf(&n.logs, "=== %s: process %d started at %s\n", n.name, n.gen, e.at(time.Now()))
	if err := cmd.Start(); err != nil {
		n.mu.Unlock()
		e.t.Fatal(err)
	}
	exited := make(chan struct{})
	n.cmd, n.relays, n.started, n.exited = cmd, relays, time.Now(), exited
	n.expectExit, n.restartOnExit, n.reported = false, false, false
	n.mu.Unlock()
	go func() {
		err := cmd.Wait()
		n.mu.Lock()
		n.exitErr, n.exitAt = err, time.Now()
		fmt.Fprintf(&n.logs, "=== %s: process %d exited at %s: %v\n", n.name, n.gen, e.at(n.exitAt), err)
		n.mu.Unlock()
		close(exited)
	}()
	e.t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		<-exited
	})
}

// useLease restarts every node with the lease d unless they run with it:
// each is stopped (SIGTERM: the nodes are idle between scenarios) and
// started again, and waited for until it beats.
func (e *env) useLease(ctx context.Context, sc *scenario, d time.Duration) {
	if e.lease == d {
		return
	}
	for _, n := range e.nodes {
		n.mu.Lock()
		n.expectExit, n.restartOnExit = true, false
		n.mu.Unlock()
		cmd, exited := n.proc()
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			e.t.Fatalf("%s: %s did not stop within a minute of SIGTERM:\n%s", sc.label, n.name, tail(n.logs.String(), 30))
		}
	}
	e.note(sc, "the nodes stopped; starting them again with --lost-after %s (was %s)", d, e.lease)
	e.lease = d
	for _, n := range e.nodes {
		e.start(n)
	}
	for _, n := range e.nodes {
		if _, err := e.waitBeat(ctx, n, 2*time.Minute); err != nil {
			e.t.Fatalf("%s: %v\n%s", sc.label, err, n.logs.String())
		}
	}
}

// proc returns n's current process and its exit channel.
func (n *node) proc() (*exec.Cmd, chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd, n.exited
}

// signal sends sig to n's current process.
func (n *node) signal(sig syscall.Signal) error {
	cmd, _ := n.proc()
	return cmd.Process.Signal(sig)
}

// cut cuts n's relays: it is cut off from every server.
func (n *node) cut() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, r := range n.relays {
		r.Cut()
	}
}

// exitedNow reports whether n's current process has exited.
func (n *node) exitedNow() bool {
	_, ch := n.proc()
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitBeat waits until n's heartbeat is one its current process wrote
// (its time after the process started), for up to bound.
func (e *env) waitBeat(ctx context.Context, n *node, bound time.Duration) (fleet.Heartbeat, error) {
	n.mu.Lock()
	since := n.started
	n.mu.Unlock()
	deadline := time.Now().Add(bound)
	for {
		h, err := e.heartbeat(ctx, n.name)
		if err == nil && h.Time.After(since) {
			return h, nil
		}
		if n.exitedNow() {
			return h, fmt.Errorf("%s exited before it wrote a heartbeat", n.name)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return h, fmt.Errorf("no heartbeat of %s's process started at %s within %s (last read: %+v, %v)", n.name, e.at(since), bound, h, err)
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

// heartbeat reads a node's heartbeat.
func (e *env) heartbeat(ctx context.Context, name string) (fleet.Heartbeat, error) {
	gctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	en, err := e.f.Nodes.Get(gctx, name)
	if err != nil {
		return fleet.Heartbeat{}, err
	}
	var h fleet.Heartbeat
	err = json.Unmarshal(en.Value(), &h)
	return h, err
}

// sleep waits d or until ctx ends. It is used for the faults' own
// durations and as the interval of polls, never to let things settle.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
