package forward

import (
	"context"
	"fmt"
	"sync"

	"github.com/mandatevm/mandate/sandbox"
)

// Loopback returns a Starter that runs guests on eng, a second engine in
// this process with Stubs as its "mandate" host module, passing every
// message through Marshal and Unmarshal as a network would. wasm finds the
// bytes of a module by digest. It is how the kernel's tests run every
// guest "elsewhere" without a fleet.
func Loopback(eng sandbox.Engine, wasm func(digest string) ([]byte, bool)) Starter {
	var mu sync.Mutex
	compiled := map[string]sandbox.Module{}
	return func(ctx context.Context, mod sandbox.Module, cfg sandbox.RunConfig) (Conn, error) {
		mu.Lock()
		m, ok := compiled[mod.Digest()]
		mu.Unlock()
		if !ok {
			b, ok := wasm(mod.Digest())
			if !ok {
				return nil, fmt.Errorf("loopback: no module %s", mod.Digest())
			}
			var err error
			if m, err = eng.Compile(ctx, b); err != nil {
				return nil, err
			}
			mu.Lock()
			compiled[mod.Digest()] = m
			mu.Unlock()
		}
		c := &loopConn{calls: make(chan []byte), replies: make(chan []byte), exit: make(chan []byte, 1)}
		gctx, cancel := context.WithCancel(WithSender(context.Background(), c, 0))
		c.cancel, c.gone = cancel, gctx.Done()
		var out, errOut Output
		cfg.Stdout, cfg.Stderr = &out, &errOut
		go func() {
			err := m.Run(gctx, cfg)
			c.exit <- MarshalExit(ExitOf(err, out.Bytes(), errOut.Bytes()))
		}()
		return c, nil
	}
}

// loopConn is both ends of a loopback run: the stubs' Sender and the
// kernel's Conn.
type loopConn struct {
	calls, replies chan []byte
	exit           chan []byte
	cancel         context.CancelFunc
	gone           <-chan struct{} // closed once the guest is killed
}

// Output keeps the first MaxOutput bytes written to it, all an Exit
// carries: the stdout or stderr of a guest run for a kernel elsewhere.
type Output struct {
	mu sync.Mutex
	b  []byte
}

// Write implements io.Writer; it never fails.
func (w *Output) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := MaxOutput - len(w.b); room > 0 {
		w.b = append(w.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// Bytes returns what was kept.
func (w *Output) Bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b
}

// Send is the guest's side.
func (c *loopConn) Send(ctx context.Context, call *Call) (*Reply, error) {
	select {
	case c.calls <- MarshalCall(call):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case b := <-c.replies:
		_, r, _, err := Unmarshal(b)
		if err == nil && r == nil {
			err = fmt.Errorf("loopback: not a reply")
		}
		return r, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *loopConn) Next(ctx context.Context) (*Call, *Exit, error) {
	var b []byte
	select {
	case b = <-c.calls:
	case b = <-c.exit:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	call, _, exit, err := Unmarshal(b)
	if err == nil && call == nil && exit == nil {
		err = fmt.Errorf("loopback: a reply from the guest")
	}
	return call, exit, err
}

func (c *loopConn) Reply(ctx context.Context, r *Reply) error {
	select {
	case c.replies <- MarshalReply(r):
		return nil
	case <-c.gone: // killed: no stub waits for it, Next has the exit
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *loopConn) Kill()  { c.cancel() }
func (c *loopConn) Close() { c.cancel() }

// LoopbackPlacer is a kernel.Placer for every placement: children run
// through start (Loopback, in tests).
type LoopbackPlacer struct{ Start Starter }

// Place implements kernel.Placer.
func (p LoopbackPlacer) Place(_ context.Context, _ string, mod sandbox.Module, host []sandbox.HostFunc) (sandbox.Module, error) {
	return NewModule(mod, host, p.Start), nil
}
