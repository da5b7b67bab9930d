package attacks_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/forward"
)

// forwarding is what the envs of TestAttacksForwarded share: the guests'
// engine (a second engine whose "mandate" host module is forward.Stubs)
// and the Starter that runs guests on it.
type forwarding struct {
	start forward.Starter
}

func newForwarding(t *testing.T) *forwarding {
	t.Helper()
	eng := testengine.New(t)
	if err := eng.Host(abi.ModuleName, forward.Stubs(kernel.HostCallFuncs())); err != nil {
		t.Fatal(err)
	}
	return &forwarding{start: forward.Loopback(eng, guestByDigest)}
}

// guestByDigest finds a built guest's bytes, for the guests' node.
func guestByDigest(d string) ([]byte, bool) {
	for _, w := range guests {
		if sandbox.Digest(w) == d {
			return w, true
		}
	}
	return nil, false
}

// hostCapture is the kernel's engine, keeping the host functions the
// kernel registers: a forwarded root task serves its calls with them, as
// the Placer's children do with those Place is given.
type hostCapture struct {
	sandbox.Engine
	fwd    *forwarding
	funcs  []sandbox.HostFunc
	starts atomic.Int64 // guests started elsewhere
}

// start is fwd's Starter, counted.
func (c *hostCapture) start(ctx context.Context, mod sandbox.Module, cfg sandbox.RunConfig) (forward.Conn, error) {
	c.starts.Add(1)
	return c.fwd.start(ctx, mod, cfg)
}

// checkAllForwarded asserts that every task the kernel ran was run
// elsewhere: none ran on the kernel's own engine.
func (e *env) checkAllForwarded(t *testing.T) {
	t.Helper()
	if n, started := len(e.k.Graph().Tasks), e.fwd.starts.Load(); int64(n) != started {
		t.Errorf("the kernel ran %d tasks, %d of them elsewhere", n, started)
	}
}

func (c *hostCapture) Host(module string, funcs []sandbox.HostFunc) error {
	if module == abi.ModuleName {
		c.funcs = funcs
	}
	return c.Engine.Host(module, funcs)
}

// TestAttacksForwarded runs every row of TestAttacks with the attacking
// task, its children and the well-behaved task after it running
// "elsewhere": each guest runs on a second engine and every host call it
// makes is forwarded (through the wire codec) to the env's kernel, which
// mediates it. The root task is wrapped with forward.NewModule; children
// are placed by the kernel's Placer (the spawner grant gets placement
// "fleet"). The expectations are the local rows', but for what forwardedRow
// adapts, each with its reason.
func TestAttacksForwarded(t *testing.T) {
	fw := newForwarding(t)
	all := append(append(append(append([]attack(nil), attacks...), flowAttacks...), payAttacks...), limitAttacks...)
	sem := make(chan struct{}, max(8, 2*runtime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	for _, a := range all {
		a, skip := forwardedRow(a)
		a.opts.fwd = fw
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			t.Run(a.name, func(t *testing.T) {
				if skip != "" {
					t.Skip(skip)
				}
				runAttack(t, a)
			})
		}()
	}
	wg.Wait()
}

// forwardedRow adapts the rows that cannot behave the same elsewhere, or
// says why one is not run.
func forwardedRow(a attack) (_ attack, skip string) {
	switch a.name {
	case "recycled-handles":
		// The row makes two host calls per generation of a slot, 2^20
		// generations: about 2 million round trips, 5 µs each on the
		// loopback under wazero (10 s) but 80 µs under wasmtime, whose
		// host calls are cgo callbacks on a locked thread that sleeps
		// and is woken at each hand-off (BenchmarkForwardedCall): more
		// than the row's 60 s. What it checks, a slot retired at its
		// last generation, is the kernel's handle table wherever the
		// guest runs.
		if testengine.Name() == "wasmtime" {
			return a, "2 million forwarded calls take minutes under wasmtime's loopback; run under wazero"
		}
		// 10 s alone, but 40-58 s here beside two test suites on 2 cores:
		// the row's limit is a hang guard, not a measure.
		a.limits.Timeout = 2 * hangGuard
	case "stdout-flood":
		// The guest's node keeps the first forward.MaxOutput bytes of
		// each stream (64 KiB, the row's own limit) and an Exit carries
		// no count of what it dropped: the kernel keeps the limit's
		// worth and cannot report the truncation. The flood is still
		// bounded (what is kept, and what the guest's node holds).
		a.check = func(t *testing.T, e *env, o *outcome) {
			for name, out := range map[string]kernel.Output{"stdout": o.task.Stdout(), "stderr": o.task.Stderr()} {
				if len(out.Data) != 64<<10 {
					t.Errorf("%s kept %d bytes (truncated=%v, dropped %d), want the first %d", name, len(out.Data), out.Truncated, out.Dropped, 64<<10)
				}
			}
		}
	case "table-exhaustion/initial":
		// The kernel's engine refuses the module when it is resolved,
		// before anything is placed; a fleet node compiles the module
		// itself, so the guests' node must refuse it too.
		a.before = func(t *testing.T, e *env) {
			m := digestOnly(sandbox.Digest(guests[a.guest]))
			if conn, err := e.fwd.fwd.start(context.Background(), m, sandbox.RunConfig{}); err == nil {
				conn.Close()
				t.Errorf("the guests' node started %s", a.guest)
			} else {
				t.Logf("refused by the guests' node: %v", err)
			}
		}
	}
	return a, ""
}

// digestOnly is a module known by its digest alone, for a Starter.
type digestOnly string

func (d digestOnly) Digest() string                             { return string(d) }
func (digestOnly) Kind() sandbox.ModuleKind                     { return sandbox.Command }
func (digestOnly) Run(context.Context, sandbox.RunConfig) error { return errors.New("not here") }
func (digestOnly) Close(context.Context) error                  { return nil }
