package natstest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Relay is a TCP relay to a NATS server that can be cut, as a network
// partition cuts a node off: every connection is closed and new ones are
// refused.
type Relay struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	cut   bool
}

// StartRelay relays loopback connections to target ("host:port") until
// Cut or the test's end.
func StartRelay(t testing.TB, target string) *Relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Relay{ln: ln}
	t.Cleanup(p.Cut)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				c.Close()
				s.Close()
				return
			}
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(c, s); c.Close() }()
		}
	}()
	return p
}

// URL is the relay's nats:// URL.
func (p *Relay) URL() string { return "nats://" + p.ln.Addr().String() }

// Cut closes every relayed connection and refuses new ones.
func (p *Relay) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	p.ln.Close()
	for _, c := range p.conns {
		c.Close()
	}
}
