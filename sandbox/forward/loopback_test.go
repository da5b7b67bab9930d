package forward_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/internal/testengine"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/forward"
)

var (
	guestsMu sync.Mutex
	built    = map[string][]byte{}
)

// guest builds testdata/guests/name (cached by content across runs).
func guest(t testing.TB, name string) []byte {
	t.Helper()
	guestsMu.Lock()
	defer guestsMu.Unlock()
	if w, ok := built[name]; ok {
		return w
	}
	dir := filepath.Join("..", "..", "testdata", "guests", name)
	reactor, err := guestbuild.IsReactor(dir)
	if err != nil {
		t.Fatal(err)
	}
	w, _, err := guestbuild.Build(context.Background(), dir, guestbuild.Options{Reactor: reactor})
	if err != nil {
		t.Fatalf("building %s: %v", name, err)
	}
	built[name] = w
	return w
}

func byDigest(d string) ([]byte, bool) {
	guestsMu.Lock()
	defer guestsMu.Unlock()
	for _, w := range built {
		if sandbox.Digest(w) == d {
			return w, true
		}
	}
	return nil, false
}

// guestEngine is the engine of the guests' node: forward.Stubs as its
// "mandate" host module.
func guestEngine(t testing.TB) sandbox.Engine {
	t.Helper()
	eng := testengine.New(t)
	if err := eng.Host(abi.ModuleName, forward.Stubs(kernel.HostCallFuncs())); err != nil {
		t.Fatal(err)
	}
	return eng
}

// kernelEngine is the kernel's engine, keeping the host functions the
// kernel registers, which serve a forwarded task's calls.
type kernelEngine struct {
	sandbox.Engine
	funcs []sandbox.HostFunc
}

func (e *kernelEngine) Host(module string, funcs []sandbox.HostFunc) error {
	if module == abi.ModuleName {
		e.funcs = funcs
	}
	return e.Engine.Host(module, funcs)
}

// TestForwardedLoopbackStops: a guest on the loopback engine whose host
// call blocks in the kernel stops at its deadline, not when the call ends
// nor KillGrace later.
func TestForwardedLoopbackStops(t *testing.T) {
	var host []sandbox.HostFunc
	blocked := make(chan struct{}, 1)
	cut := make(chan bool, 1) // whether the deadline ended the waiting call
	for _, hc := range kernel.HostCallFuncs() {
		var f func(context.Context, sandbox.Memory, []uint64)
		switch hc.Name {
		case abi.CapLookupName: // waits, as for a person's yes
			f = func(ctx context.Context, _ sandbox.Memory, p []uint64) {
				blocked <- struct{}{}
				select {
				case <-ctx.Done():
					p[0] = uint64(abi.ETIMEDOUT)
					cut <- true
				case <-time.After(20 * time.Second):
					p[0] = uint64(abi.ENOTFOUND)
					cut <- false
				}
			}
		default:
			f = func(_ context.Context, _ sandbox.Memory, p []uint64) { p[0] = uint64(abi.ENOTFOUND) }
		}
		host = append(host, sandbox.HostFunc{Name: hc.Name, Params: hc.Params, Fn: f})
	}
	ctx := context.Background()
	eng := testengine.New(t)
	if err := eng.Host(abi.ModuleName, host); err != nil {
		t.Fatal(err)
	}
	kmod, err := eng.Compile(ctx, guest(t, "bench-noop"))
	if err != nil {
		t.Fatal(err)
	}
	mod := forward.NewModule(kmod, host, forward.Loopback(guestEngine(t), byDigest))
	err = mod.Run(ctx, sandbox.RunConfig{Entry: "bench", Timeout: 500 * time.Millisecond})
	if !errors.Is(err, sandbox.ErrTimeout) {
		t.Errorf("Run: %v, want ErrTimeout", err)
	}
	select {
	case <-blocked:
	default:
		t.Fatalf("the guest never reached its blocking call")
	}
	// The call ended because the deadline passed, not after its own 20 s
	// (no bound on the time taken: a loaded machine is slow, not wrong).
	if !<-cut {
		t.Errorf("the waiting call ran its course: the deadline did not reach it")
	}
}

// TestForwardedLoopbackOutput: the guests' node keeps forward.MaxOutput
// bytes of a stream, not what the guest writes (100 MB here).
func TestForwardedLoopbackOutput(t *testing.T) {
	w := guest(t, "engine-flood")
	ctx := context.Background()
	kmod, err := testengine.New(t).Compile(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	mod := forward.NewModule(kmod, nil, forward.Loopback(guestEngine(t), byDigest))
	var out bytes.Buffer
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := mod.Run(ctx, sandbox.RunConfig{Stdout: &out, Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if out.Len() != forward.MaxOutput || out.String() != string(bytes.Repeat([]byte("x"), forward.MaxOutput)) {
		t.Errorf("stdout of %d bytes, want the first %d", out.Len(), forward.MaxOutput)
	}
	got := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d MB", got>>20)
	if got > 50<<20 {
		t.Errorf("running a guest that writes 100 MB allocated %d MB", got>>20)
	}
}

// benchEnv is a kernel with the test kind and a task spec running
// bench-noop's "bench" entry: N no-op capability calls.
func benchEnv(b *testing.B, forwarded bool) (*kernel.Kernel, kernel.TaskSpec) {
	b.Helper()
	ctx := context.Background()
	eng := &kernelEngine{Engine: testengine.New(b)}
	k, err := kernel.New(kernel.Config{Engine: eng, Kinds: []kindapi.Kind{kerneltest.New()}})
	if err != nil {
		b.Fatal(err)
	}
	mod, err := eng.Compile(ctx, guest(b, "bench-noop"))
	if err != nil {
		b.Fatal(err)
	}
	if forwarded {
		mod = forward.NewModule(mod, eng.funcs, forward.Loopback(guestEngine(b), byDigest))
	}
	scope, err := k.Grant("test", kindapi.GrantContext{}, []byte(`{"level":5}`))
	if err != nil {
		b.Fatal(err)
	}
	return k, kernel.TaskSpec{
		Module: mod, Principal: "mallory", Entry: "bench", Limits: kernel.Limits{Timeout: 10 * time.Minute},
		Grants: []kernel.GrantSpec{{Name: "test", Kind: "test", Scope: scope}},
	}
}

// BenchmarkForwardedCall compares a capability call (the test kind's
// no-op, as kernel.BenchmarkCapCall) made by a guest running here with
// the same call made by a guest on the loopback engine, whose every host
// call goes through forward's wire codec to the kernel and back. One task
// makes b.N calls (ns/op includes its start, amortised); guest-ns/call is
// the guest's own clock over the calls alone.
func BenchmarkForwardedCall(b *testing.B) {
	for _, forwarded := range []bool{false, true} {
		name := "local"
		if forwarded {
			name = "forwarded"
		}
		b.Run(name, func(b *testing.B) {
			k, spec := benchEnv(b, forwarded)
			// Once unmeasured: the guests' node compiles the module on
			// its first run.
			spec.Input = []byte("1 1")
			if _, err := k.Run(context.Background(), spec); err != nil {
				b.Fatal(err)
			}
			spec.Input = []byte(fmt.Sprintf("%d 100", max(b.N, 100)))
			b.ReportAllocs()
			b.ResetTimer()
			task, err := k.Run(context.Background(), spec)
			if err != nil {
				b.Fatalf("%v\n%s", err, task.Stderr())
			}
			b.StopTimer()
			raw, _ := task.Result()
			var m map[string]float64
			if err := json.Unmarshal(raw, &m); err != nil {
				b.Fatalf("result %q: %v", raw, err)
			}
			b.ReportMetric(m["mean_ns"], "guest-ns/call")
			b.ReportMetric(m["p50_ns"], "p50-ns/call")
			b.ReportMetric(m["p99_ns"], "p99-ns/call")
		})
	}
}
