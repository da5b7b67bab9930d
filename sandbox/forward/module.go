package forward

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mandatevm/mandate/sandbox"
)

// Conn is the kernel's side of one remote guest's run.
type Conn interface {
	// Next returns the next message from the guest's node: a Call to
	// serve, or the Exit that ends the run. An error means the run is
	// over without one (the guest's node is lost or cut off); Next must
	// return one when ctx ends.
	Next(ctx context.Context) (*Call, *Exit, error)
	// Reply answers the Call Next returned last.
	Reply(ctx context.Context, r *Reply) error
	// Kill asks the guest's node to stop the guest. Next still reports how
	// it ended.
	Kill()
	// Close releases the Conn once the run is over.
	Close()
}

// Starter starts the guest of mod elsewhere, under cfg's limits, and
// returns the Conn its calls arrive on.
type Starter func(ctx context.Context, mod sandbox.Module, cfg sandbox.RunConfig) (Conn, error)

// KillGrace is how long a killed remote guest's node has to say it stopped
// before the run ends without its word.
const KillGrace = 5 * time.Second

// NewModule returns a module with mod's digest and kind whose Run runs the
// guest through start and serves each of its calls with host (the
// kernel's own host functions): what a kernel.Placer returns.
func NewModule(mod sandbox.Module, host []sandbox.HostFunc, start Starter) sandbox.Module {
	return &module{inner: mod, host: HostMap(host), start: start}
}

type module struct {
	inner sandbox.Module
	host  map[string]sandbox.HostFunc
	start Starter
}

func (m *module) Digest() string                  { return m.inner.Digest() }
func (m *module) Kind() sandbox.ModuleKind        { return m.inner.Kind() }
func (m *module) Close(ctx context.Context) error { return nil } // inner is the resolver's

// Run implements sandbox.Module: it serves the remote guest's calls in
// order, with ctx (the task's), until the guest's node reports its end.
// When ctx ends or cfg.Timeout passes, the guest is killed.
func (m *module) Run(ctx context.Context, cfg sandbox.RunConfig) error {
	conn, err := m.start(ctx, m.inner, cfg)
	if err != nil {
		return fmt.Errorf("starting the guest elsewhere: %w", err)
	}
	defer conn.Close()
	nctx, ncancel := context.WithCancel(context.WithoutCancel(ctx))
	defer ncancel()
	// The calls' ctx ends at the deadline or a kill, as a local guest's
	// host calls' does: a call waiting (for a child, a person's yes) ends
	// with the run, and none is served after it.
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	var (
		mu  sync.Mutex
		why error
	)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		var deadline <-chan time.Time
		if cfg.Timeout > 0 {
			t := time.NewTimer(cfg.Timeout)
			defer t.Stop()
			deadline = t.C
		}
		var w error
		select {
		case <-stop:
			return
		case <-ctx.Done():
			w = sandbox.ErrCanceled
		case <-deadline:
			w = sandbox.ErrTimeout
		}
		mu.Lock()
		why = w
		mu.Unlock()
		scancel()
		conn.Kill()
		t := time.AfterFunc(KillGrace, ncancel)
		<-stop
		t.Stop()
	}()
	stopped := func() error {
		mu.Lock()
		defer mu.Unlock()
		return why
	}
	for {
		c, e, err := conn.Next(nctx)
		if err != nil {
			if w := stopped(); w != nil {
				return w
			}
			return fmt.Errorf("the guest's node: %w", err)
		}
		if e != nil {
			if cfg.Stdout != nil && len(e.Stdout) > 0 {
				cfg.Stdout.Write(e.Stdout)
			}
			if cfg.Stderr != nil && len(e.Stderr) > 0 {
				cfg.Stderr.Write(e.Stderr)
			}
			err := e.Err()
			if w := stopped(); w != nil && err != nil {
				return w
			}
			return err
		}
		if err := conn.Reply(nctx, Serve(sctx, m.host, c)); err != nil {
			if w := stopped(); w != nil {
				return w
			}
			return fmt.Errorf("answering the guest's node: %w", err)
		}
	}
}

// ErrClosed is a Conn used after its run ended.
var ErrClosed = errors.New("forward: connection closed")
