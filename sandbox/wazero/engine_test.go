package wazero

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/mandatevm/mandate/sandbox"
)

type ctxKey struct{}

// testHost records what the mandate_test host functions saw.
type testHost struct {
	mu    sync.Mutex
	calls []string // "<ctx value>:<bytes read>"
}

func (h *testHost) funcs() []sandbox.HostFunc {
	return []sandbox.HostFunc{
		{Name: "echo", Params: 2, Fn: func(ctx context.Context, mem sandbox.Memory, stack []uint64) {
			b, ok := mem.Read(uint32(stack[0]), uint32(stack[1]))
			if !ok {
				stack[0] = 0
				return
			}
			v, _ := ctx.Value(ctxKey{}).(string)
			h.mu.Lock()
			h.calls = append(h.calls, v+":"+string(b))
			h.mu.Unlock()
			stack[0] = uint64(len(b))
		}},
		{Name: "boom", Params: 0, Fn: func(context.Context, sandbox.Memory, []uint64) {
			panic("kaboom")
		}},
	}
}

func newTestEngine(t testing.TB, cfg sandbox.Config) (*Engine, *testHost) {
	t.Helper()
	ctx := context.Background()
	if cfg.CacheDir == "" {
		cfg.CacheDir = testCacheDir
	}
	e, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(ctx) })
	h := &testHost{}
	if err := e.Host("mandate_test", h.funcs()); err != nil {
		t.Fatal(err)
	}
	return e, h
}

func compile(t testing.TB, e *Engine, guest string) sandbox.Module {
	t.Helper()
	m, err := e.Compile(context.Background(), guests[guest])
	if err != nil {
		t.Fatalf("Compile(%s): %v", guest, err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

func TestHello(t *testing.T) {
	e, _ := newTestEngine(t, sandbox.Config{})
	m := compile(t, e, "hello")
	if got, want := m.Kind(), sandbox.Command; got != want {
		t.Errorf("Kind() = %v, want %v", got, want)
	}
	if got, want := m.Digest(), sandbox.Digest(guests["hello"]); got != want {
		t.Errorf("Digest() = %s, want %s", got, want)
	}
	var out, errOut bytes.Buffer
	if err := m.Run(context.Background(), sandbox.RunConfig{Name: "hello", Stdout: &out, Stderr: &errOut}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got, want := out.String(), "hello, stdout\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	if got, want := errOut.String(), "hello, stderr\n"; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
	// Nil writers discard.
	if err := m.Run(context.Background(), sandbox.RunConfig{}); err != nil {
		t.Fatalf("Run with nil writers: %v", err)
	}
}

func TestExitCode(t *testing.T) {
	e, _ := newTestEngine(t, sandbox.Config{})
	err := compile(t, e, "exit").Run(context.Background(), sandbox.RunConfig{Name: "exit"})
	var ee *sandbox.ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || ee.Trap != "" || ee.Err != nil {
		t.Fatalf("Run = %#v, want *ExitError{Code: 3}", err)
	}
}

func TestNoAmbientAuthority(t *testing.T) {
	e, _ := newTestEngine(t, sandbox.Config{})
	var out bytes.Buffer
	if err := compile(t, e, "ambient").Run(context.Background(), sandbox.RunConfig{Name: "probe", Stdout: &out}); err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		got[k] = v
	}
	want := map[string]string{
		"readdir_root": "true", // true means the attempt failed
		"readdir_dot":  "true",
		"readfile":     "true",
		"create":       "true",
		"environ":      "0",
		"getenv_home":  `""`,
		"getenv_path":  `""`,
		"args":         "probe",
		"dial":         "true",
		"filelistener": "true",
		"stdin":        "0",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: got %q, want %q", k, got[k], w)
		}
	}
	if _, err := os.Stat("/tmp/mandate-ambient-probe"); err == nil {
		t.Errorf("guest created /tmp/mandate-ambient-probe on the host")
	}
}

func TestReactor(t *testing.T) {
	e, h := newTestEngine(t, sandbox.Config{})
	m := compile(t, e, "reactor")
	if got, want := m.Kind(), sandbox.Reactor; got != want {
		t.Fatalf("Kind() = %v, want %v", got, want)
	}
	ctx := context.WithValue(context.Background(), ctxKey{}, "task-42")

	if err := m.Run(ctx, sandbox.RunConfig{Name: "r"}); err != nil {
		t.Fatalf("Run(run): %v", err)
	}
	if got, want := strings.Join(h.calls, "|"), "task-42:hello from reactor"; got != want {
		t.Errorf("host saw %q, want %q", got, want)
	}

	tests := []struct {
		entry    string
		wantCode uint32
		wantTrap string
	}{
		{entry: "noop"},
		{entry: "fail", wantCode: 5},
		{entry: "panicky", wantTrap: "host function mandate_test.boom panicked: kaboom"},
	}
	for _, tt := range tests {
		t.Run(tt.entry, func(t *testing.T) {
			err := m.Run(ctx, sandbox.RunConfig{Name: "r", Entry: tt.entry})
			if tt.wantCode == 0 && tt.wantTrap == "" {
				if err != nil {
					t.Fatalf("Run = %v, want nil", err)
				}
				return
			}
			var ee *sandbox.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("Run = %v, want *ExitError", err)
			}
			if ee.Code != tt.wantCode || !strings.Contains(ee.Trap, tt.wantTrap) {
				t.Errorf("Run = {Code: %d, Trap: %q}, want {Code: %d, Trap containing %q}", ee.Code, ee.Trap, tt.wantCode, tt.wantTrap)
			}
		})
	}

	if err := m.Run(ctx, sandbox.RunConfig{Entry: "nope"}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("Run(nope) = %v, want an error naming the entry", err)
	}
	// The engine survives a host panic.
	if err := m.Run(ctx, sandbox.RunConfig{}); err != nil {
		t.Errorf("Run after panic: %v", err)
	}
}

func TestSpinStoppedAtDeadline(t *testing.T) {
	e, _ := newTestEngine(t, sandbox.Config{})
	for _, guest := range []string{"spin", "sleep"} {
		t.Run(guest, func(t *testing.T) {
			m := compile(t, e, guest)
			start := time.Now()
			err := m.Run(context.Background(), sandbox.RunConfig{Name: guest, Timeout: 200 * time.Millisecond})
			if !errors.Is(err, sandbox.ErrTimeout) {
				t.Fatalf("Run = %v, want ErrTimeout", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("stopping took %v", d)
			}
			// The parent's deadline counts too.
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			if err := m.Run(ctx, sandbox.RunConfig{}); !errors.Is(err, sandbox.ErrTimeout) {
				t.Fatalf("Run with parent deadline = %v, want ErrTimeout", err)
			}
			// Cancellation is reported as such.
			ctx, cancel = context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			if err := m.Run(ctx, sandbox.RunConfig{}); !errors.Is(err, sandbox.ErrCanceled) {
				t.Fatalf("Run canceled = %v, want ErrCanceled", err)
			}
			if err := m.Run(ctx, sandbox.RunConfig{}); !errors.Is(err, sandbox.ErrCanceled) {
				t.Fatalf("Run with a done ctx = %v, want ErrCanceled", err)
			}
		})
	}
	// The engine still runs the next module normally.
	var out bytes.Buffer
	if err := compile(t, e, "hello").Run(context.Background(), sandbox.RunConfig{Stdout: &out}); err != nil || out.String() != "hello, stdout\n" {
		t.Fatalf("hello after spin: err %v, stdout %q", err, out.String())
	}
}

func TestMemoryLimit(t *testing.T) {
	e, _ := newTestEngine(t, sandbox.Config{})
	m := compile(t, e, "membomb")
	var errOut bytes.Buffer
	err := m.Run(context.Background(), sandbox.RunConfig{Name: "bomb", MemoryLimit: 32 << 20, Timeout: time.Minute, Stderr: &errOut})
	var ee *sandbox.ExitError
	if !errors.As(err, &ee) || !errors.Is(err, sandbox.ErrMemoryLimit) {
		t.Fatalf("Run = %v, want *ExitError wrapping ErrMemoryLimit\nstderr: %s", err, tail(errOut.String()))
	}
	if !strings.Contains(errOut.String(), "out of memory") {
		t.Errorf("stderr does not mention out of memory: %s", tail(errOut.String()))
	}
	t.Logf("membomb: %v", err)

	// An initial memory larger than the limit fails cleanly, without running.
	var out bytes.Buffer
	err = compile(t, e, "hello").Run(context.Background(), sandbox.RunConfig{MemoryLimit: 64 << 10, Stdout: &out})
	if !errors.Is(err, sandbox.ErrMemoryLimit) || out.Len() != 0 {
		t.Fatalf("Run with 64KiB = %v (stdout %q), want ErrMemoryLimit and no output", err, out.String())
	}
	// A limit the guest fits in is fine.
	if err := compile(t, e, "hello").Run(context.Background(), sandbox.RunConfig{MemoryLimit: 32 << 20}); err != nil {
		t.Fatalf("Run with 32MiB: %v", err)
	}
}

func tail(s string) string {
	if len(s) > 2000 {
		return "..." + s[len(s)-2000:]
	}
	return s
}

type countWriter struct{ n atomic.Int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n.Add(int64(len(p))); return len(p), nil }

func TestFlood(t *testing.T) {
	e, _ := newTestEngine(t, sandbox.Config{})
	var w countWriter
	if err := compile(t, e, "flood").Run(context.Background(), sandbox.RunConfig{Stdout: &w, Timeout: time.Minute}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got, want := w.n.Load(), int64(100<<20); got != want {
		t.Errorf("wrote %d bytes, want %d", got, want)
	}
}

func TestImportRefused(t *testing.T) {
	e, _ := newTestEngine(t, sandbox.Config{})
	_, err := e.Compile(context.Background(), guests["badimport"])
	if err == nil || !strings.Contains(err.Error(), "evil.steal_secrets") {
		t.Fatalf("Compile = %v, want an error naming evil.steal_secrets", err)
	}
	// A module that needs mandate_test is refused by an engine without it.
	bare, err := New(context.Background(), sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close(context.Background())
	if _, err := bare.Compile(context.Background(), guests["reactor"]); err == nil || !strings.Contains(err.Error(), "mandate_test.echo") {
		t.Fatalf("Compile without host module = %v, want an error naming mandate_test.echo", err)
	}
	if _, err := bare.Compile(context.Background(), []byte("\x00asm\x01\x00\x00\x00\x0b")); err == nil {
		t.Fatalf("Compile of a truncated module succeeded")
	}
}

func TestHostRegistration(t *testing.T) {
	e, h := newTestEngine(t, sandbox.Config{})
	if err := e.Host("mandate_test", h.funcs()); err == nil {
		t.Errorf("second Host(mandate_test) succeeded")
	}
	if err := e.Host("wasi_snapshot_preview1", nil); err == nil {
		t.Errorf("Host(wasi_snapshot_preview1) succeeded")
	}
	if err := e.Host("bad", []sandbox.HostFunc{{Name: "f", Params: 1}}); err == nil {
		t.Errorf("Host with nil Fn succeeded")
	}
	compile(t, e, "hello")
	if err := e.Host("late", nil); err == nil {
		t.Errorf("Host after Compile succeeded")
	}
}

// fakeModule is just enough api.Module for calling a host adapter directly.
type fakeModule struct {
	api.Module
	mem api.Memory
}

func (m *fakeModule) Memory() api.Memory { return m.mem }

func TestHostCallAllocs(t *testing.T) {
	// Take a real memory from an instance.
	e, _ := newTestEngine(t, sandbox.Config{})
	inst, err := e.rt.InstantiateWithConfig(context.Background(), minimalMemoryModule, baseConfig.WithName("mem"))
	if err != nil {
		t.Fatal(err)
	}
	var mod api.Module = &fakeModule{mem: inst.Memory()}
	var sum uint32
	fn := hostAdapter("m", sandbox.HostFunc{Name: "f", Params: 2, Fn: func(ctx context.Context, mem sandbox.Memory, stack []uint64) {
		b, _ := mem.Read(uint32(stack[0]), uint32(stack[1]))
		sum += uint32(len(b))
		stack[0] = 0
	}})
	ctx := context.Background()
	stack := []uint64{0, 16}
	if n := testing.AllocsPerRun(1000, func() { stack[0], stack[1] = 0, 16; fn(ctx, mod, stack) }); n != 0 {
		t.Errorf("host call allocates %v times, want 0", n)
	}
}

// minimalMemoryModule is (module (memory (export "memory") 1)).
var minimalMemoryModule = []byte{
	0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
	0x05, 0x03, 0x01, 0x00, 0x01, // memory section: 1 memory, min 1
	0x07, 0x0a, 0x01, 0x06, 'm', 'e', 'm', 'o', 'r', 'y', 0x02, 0x00, // export "memory"
}

func TestConcurrentRuns(t *testing.T) {
	e, h := newTestEngine(t, sandbox.Config{})
	hello := compile(t, e, "hello")
	reactor := compile(t, e, "reactor")
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 3; j++ {
				var out bytes.Buffer
				if err := hello.Run(context.Background(), sandbox.RunConfig{Name: "hello", Stdout: &out}); err != nil || out.String() != "hello, stdout\n" {
					t.Errorf("hello: err %v, stdout %q", err, out.String())
				}
				ctx := context.WithValue(context.Background(), ctxKey{}, "g")
				if err := reactor.Run(ctx, sandbox.RunConfig{Name: "reactor"}); err != nil {
					t.Errorf("reactor: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if got, want := len(h.calls), 30; got != want {
		t.Errorf("host saw %d calls, want %d", got, want)
	}
}

func TestCompileCache(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e1, _ := newTestEngine(t, sandbox.Config{CacheDir: dir})
	m1 := compile(t, e1, "hello")
	// Same bytes, same engine: the same compiled module.
	m2 := compile(t, e1, "hello")
	if m1.(*Module).c != m2.(*Module).c {
		t.Errorf("compiling the same bytes twice compiled twice")
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) == 0 {
		t.Fatalf("cache dir after Compile: %v entries, err %v; want entries", len(ents), err)
	}
	// Closing one handle keeps the other usable.
	m1.Close(ctx)
	if err := m2.Run(ctx, sandbox.RunConfig{}); err != nil {
		t.Fatalf("Run after closing the other handle: %v", err)
	}

	// A second engine on the same directory loads from it.
	e2, _ := newTestEngine(t, sandbox.Config{CacheDir: dir})
	start := time.Now()
	m3 := compile(t, e2, "hello")
	t.Logf("compile from disk cache: %v", time.Since(start))
	var out bytes.Buffer
	if err := m3.Run(ctx, sandbox.RunConfig{Stdout: &out}); err != nil || out.String() != "hello, stdout\n" {
		t.Fatalf("Run from cache: err %v, stdout %q", err, out.String())
	}
}
