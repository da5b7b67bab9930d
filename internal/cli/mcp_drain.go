package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"
)

// stdioDrain keeps a stdio session's input open past its end until every
// request read from it has been answered, so that a client which writes
// its requests and closes its end at once (echo '{...}' | mandate mcp
// serve) still gets its answers: the SDK ends the session at the input's
// end, and the answers it had not written yet were lost. It waits at most
// bound after the end, and not past ctx.
type stdioDrain struct {
	ctx   context.Context
	bound time.Duration

	mu      sync.Mutex
	pending map[string]bool // ids of requests read, not yet answered or canceled
	changed chan struct{}   // closed at each answer
	rline   []byte          // the input's partial line
	wline   []byte          // the output's partial line
	eof     bool
}

func newStdioDrain(ctx context.Context, bound time.Duration) *stdioDrain {
	return &stdioDrain{ctx: ctx, bound: bound, pending: map[string]bool{}, changed: make(chan struct{})}
}

// reader wraps the session's input.
func (d *stdioDrain) reader(r io.ReadCloser) io.ReadCloser { return &drainReader{d: d, r: r} }

// writer wraps the session's output.
func (d *stdioDrain) writer(w io.WriteCloser) io.WriteCloser { return &drainWriter{d: d, w: w} }

type drainReader struct {
	d *stdioDrain
	r io.ReadCloser
}

func (dr *drainReader) Read(p []byte) (int, error) {
	d := dr.d
	d.mu.Lock()
	eof := d.eof
	d.mu.Unlock()
	if eof {
		d.wait()
		return 0, io.EOF
	}
	n, err := dr.r.Read(p)
	d.mu.Lock()
	d.rline = eachLine(d.rline, p[:n], d.read)
	if err == io.EOF {
		if len(bytes.TrimSpace(d.rline)) > 0 {
			d.read(d.rline) // a last request with no newline
		}
		d.rline, d.eof = nil, true
	}
	d.mu.Unlock()
	if err == io.EOF {
		if n > 0 {
			return n, nil // the end is given at the next read, after the wait
		}
		d.wait()
	}
	return n, err
}

func (dr *drainReader) Close() error { return dr.r.Close() }

type drainWriter struct {
	d *stdioDrain
	w io.WriteCloser
}

func (dw *drainWriter) Write(p []byte) (int, error) {
	n, err := dw.w.Write(p)
	d := dw.d
	d.mu.Lock()
	d.wline = eachLine(d.wline, p[:n], d.wrote)
	d.mu.Unlock()
	return n, err
}

func (dw *drainWriter) Close() error { return dw.w.Close() }

// eachLine appends b to partial and calls f with each complete line.
func eachLine(partial, b []byte, f func([]byte)) []byte {
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return append(partial, b...)
		}
		if len(partial) > 0 {
			f(append(partial, b[:i]...))
			partial = partial[:0]
		} else {
			f(b[:i])
		}
		b = b[i+1:]
	}
}

// rpcMessage is what the drain reads of a JSON-RPC message.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		RequestID json.RawMessage `json:"requestId"`
	} `json:"params"`
}

// rpcID is an id's canonical form (1 and 1.0 are one id).
func rpcID(raw json.RawMessage) string {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil || v == nil {
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// read notes a request read from the client (with mu held).
func (d *stdioDrain) read(line []byte) {
	var m rpcMessage
	if json.Unmarshal(line, &m) != nil || m.Method == "" {
		return
	}
	if id := rpcID(m.ID); id != "" {
		d.pending[id] = true
		return
	}
	if m.Method == "notifications/cancelled" { // no answer follows
		d.answered(rpcID(m.Params.RequestID))
	}
}

// wrote notes a message written to the client (with mu held): a response
// answers its request.
func (d *stdioDrain) wrote(line []byte) {
	var m rpcMessage
	if json.Unmarshal(line, &m) != nil || m.Method != "" {
		return
	}
	d.answered(rpcID(m.ID))
}

func (d *stdioDrain) answered(id string) {
	if id == "" || !d.pending[id] {
		return
	}
	delete(d.pending, id)
	close(d.changed)
	d.changed = make(chan struct{})
}

// wait waits until every request read has been answered, for at most
// bound, and not past ctx.
func (d *stdioDrain) wait() {
	t := time.NewTimer(d.bound)
	defer t.Stop()
	for {
		d.mu.Lock()
		n, changed := len(d.pending), d.changed
		d.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-changed:
		case <-t.C:
			return
		case <-d.ctx.Done():
			return
		}
	}
}
