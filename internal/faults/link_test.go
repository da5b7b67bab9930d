//go:build unix

package faults

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
)

// relay is a TCP relay from a node to one NATS server of the cluster that
// can be cut, as natstest.Relay is, and that also removes the other
// servers' addresses from what the server tells the client.
//
// natstest.Relay cannot cut a node off a cluster: each server's INFO lists
// the client URLs of the whole cluster ("connect_urls"), nats.go adds them
// to its pool, and once its relays are cut the node reconnects to the real
// ports directly. Here every INFO line that goes to the client has
// connect_urls and ws_connect_urls removed, so the node's pool stays its
// three relays, and cutting them cuts it off. Only the server-to-client
// stream is parsed (INFO is a line; MSG and HMSG carry a payload whose
// length ends their line); the client's bytes are copied as they are.
type relay struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns []net.Conn
	cut   bool
}

// startRelay relays loopback connections to target ("host:port") until Cut
// or the test's end.
func startRelay(t testing.TB, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, target: target}
	t.Cleanup(r.Cut)
	go r.accept()
	return r
}

func (r *relay) accept() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", r.target)
		if err != nil {
			c.Close() // the server is down: the client tries its next URL
			continue
		}
		r.mu.Lock()
		if r.cut {
			r.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		r.conns = append(r.conns, c, s)
		r.mu.Unlock()
		go func() { io.Copy(s, c); s.Close(); c.Close() }()
		go func() { copyServerToClient(c, s); c.Close(); s.Close() }()
	}
}

// Addr is the relay's host:port.
func (r *relay) Addr() string { return r.ln.Addr().String() }

// Cut closes every relayed connection and refuses new ones.
func (r *relay) Cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = true
	r.ln.Close()
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
}

// copyServerToClient copies the NATS protocol from the server to the
// client, removing the cluster's client URLs from each INFO.
func copyServerToClient(dst io.Writer, src io.Reader) error {
	br := bufio.NewReaderSize(src, 64<<10)
	bw := bufio.NewWriterSize(dst, 64<<10)
	flush := func() error {
		if br.Buffered() == 0 {
			return bw.Flush()
		}
		return nil
	}
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			bw.Write(line)
			bw.Flush()
			return err
		}
		var payload int64 = -1
		switch {
		case bytes.HasPrefix(line, []byte("INFO ")):
			line = stripConnectURLs(line)
		case bytes.HasPrefix(line, []byte("MSG ")), bytes.HasPrefix(line, []byte("HMSG ")):
			f := bytes.Fields(line)
			n, err := strconv.ParseInt(string(f[len(f)-1]), 10, 64)
			if err != nil {
				return err
			}
			payload = n + 2 // and its \r\n
		}
		if _, err := bw.Write(line); err != nil {
			return err
		}
		if payload >= 0 {
			if _, err := io.CopyN(bw, br, payload); err != nil {
				bw.Flush()
				return err
			}
		}
		if err := flush(); err != nil {
			return err
		}
	}
}

// stripConnectURLs returns the INFO line without the cluster's URLs.
func stripConnectURLs(line []byte) []byte {
	body := bytes.TrimSpace(line[len("INFO "):])
	var info map[string]json.RawMessage
	if json.Unmarshal(body, &info) != nil {
		return line
	}
	delete(info, "connect_urls")
	delete(info, "ws_connect_urls")
	b, err := json.Marshal(info)
	if err != nil {
		return line
	}
	return append(append([]byte("INFO "), b...), '\r', '\n')
}
