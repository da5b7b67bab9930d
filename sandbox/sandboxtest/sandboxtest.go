// Package sandboxtest is the conformance suite every sandbox engine passes:
// one set of tests of the sandbox.Engine contract, run by each engine's own
// tests. It is imported only by tests.
//
//	func TestMain(m *testing.M) { sandboxtest.Main(m) }
//
//	func TestConformance(t *testing.T) {
//		sandboxtest.Run(t, func(t testing.TB, cfg sandbox.Config) sandbox.Engine {
//			e, err := wazero.New(context.Background(), cfg)
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { e.Close(context.Background()) })
//			return e
//		})
//	}
//
// newEngine is given the Config to use; a test that does not care about the
// cache passes an empty CacheDir, and the constructor may fill in a shared
// one (see CacheDir) so guests are not compiled again for every test. The
// engine it returns has no host module: the suite registers "mandate_test"
// itself where it needs one.
package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mandatevm/mandate/internal/wasmasm"
	"github.com/mandatevm/mandate/sandbox"
)

// NewEngine starts the engine under test with cfg and closes it when t ends.
type NewEngine func(t testing.TB, cfg sandbox.Config) sandbox.Engine

// Run runs the conformance suite on the engine newEngine starts.
func Run(t *testing.T, newEngine NewEngine) {
	s := &suite{newEngine: newEngine}
	for _, tc := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"Hello", s.testHello},
		{"ExitCode", s.testExitCode},
		{"NoAmbientAuthority", s.testNoAmbientAuthority},
		{"Reactor", s.testReactor},
		{"SpinStoppedAtDeadline", s.testSpinStoppedAtDeadline},
		{"StopIsolated", s.testStopIsolated},
		{"MemoryLimit", s.testMemoryLimit},
		{"RefusedGrowth", s.testRefusedGrowth},
		{"Flood", s.testFlood},
		{"ImportRefused", s.testImportRefused},
		{"HostRegistration", s.testHostRegistration},
		{"ConcurrentRuns", s.testConcurrentRuns},
		{"CompileCache", s.testCompileCache},
		{"CorruptCache", s.testCorruptCache},
		{"DeepRecursion", s.testDeepRecursion},
		{"TableGrowth", s.testTableGrowth},
		{"GCWhileSpinning", s.testGCWhileSpinning},
		{"RunawayShapes", s.testRunawayShapes},
		{"InitStopped", s.testInitStopped},
		{"SnapshotEquivalent", s.testSnapshotEquivalent},
		{"SnapshotKeptAtClose", s.testSnapshotKeptAtClose},
		{"StaticLimits", s.testStaticLimits},
		{"CompileBombs", s.testCompileBombs},
	} {
		t.Run(tc.name, tc.fn)
	}
}

type suite struct {
	newEngine NewEngine
}

// CtxKey is the context key whose string value the test host function
// "echo" records, to show that host functions see the ctx given to Run.
type CtxKey struct{}

// TestHost records what the mandate_test host functions saw.
type TestHost struct {
	mu    sync.Mutex
	calls []string // "<ctx value>:<bytes read>"
}

// Calls returns what echo saw, in order.
func (h *TestHost) Calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls...)
}

// Funcs are the functions of the import module "mandate_test" that the
// reactor guest imports: echo(ptr, len) records the bytes and returns len;
// boom() panics.
func (h *TestHost) Funcs() []sandbox.HostFunc {
	return []sandbox.HostFunc{
		{Name: "echo", Params: sandbox.Values(2), Fn: func(ctx context.Context, mem sandbox.Memory, stack []uint64) {
			b, ok := mem.Read(uint32(stack[0]), uint32(stack[1]))
			if !ok {
				stack[0] = 0
				return
			}
			v, _ := ctx.Value(CtxKey{}).(string)
			h.mu.Lock()
			h.calls = append(h.calls, v+":"+string(b))
			h.mu.Unlock()
			stack[0] = uint64(len(b))
		}},
		{Name: "boom", Fn: func(context.Context, sandbox.Memory, []uint64) {
			panic("kaboom")
		}},
	}
}

// engine starts an engine with the mandate_test host module.
func (s *suite) engine(t testing.TB, cfg sandbox.Config) (sandbox.Engine, *TestHost) {
	t.Helper()
	e := s.newEngine(t, cfg)
	h := &TestHost{}
	if err := e.Host("mandate_test", h.Funcs()); err != nil {
		t.Fatal(err)
	}
	return e, h
}

func compile(t testing.TB, e sandbox.Engine, guest string) sandbox.Module {
	t.Helper()
	return compileBytes(t, e, guest, Guest(guest))
}

func compileBytes(t testing.TB, e sandbox.Engine, what string, wasm []byte) sandbox.Module {
	t.Helper()
	m, err := e.Compile(context.Background(), wasm)
	if err != nil {
		t.Fatalf("Compile(%s): %v", what, err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

// runHello runs the hello guest and checks its output.
func runHello(t testing.TB, m sandbox.Module) {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := m.Run(context.Background(), sandbox.RunConfig{Name: "hello", Stdout: &out, Stderr: &errOut}); err != nil {
		t.Fatalf("Run(hello): %v", err)
	}
	if got, want := out.String(), "hello, stdout\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	if got, want := errOut.String(), "hello, stderr\n"; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
}

func (s *suite) testHello(t *testing.T) {
	e, _ := s.engine(t, sandbox.Config{})
	m := compile(t, e, "hello")
	if got, want := m.Kind(), sandbox.Command; got != want {
		t.Errorf("Kind() = %v, want %v", got, want)
	}
	if got, want := m.Digest(), sandbox.Digest(Guest("hello")); got != want {
		t.Errorf("Digest() = %s, want %s", got, want)
	}
	runHello(t, m)
	// Nil writers discard.
	if err := m.Run(context.Background(), sandbox.RunConfig{}); err != nil {
		t.Fatalf("Run with nil writers: %v", err)
	}
}

func (s *suite) testExitCode(t *testing.T) {
	e, _ := s.engine(t, sandbox.Config{})
	err := compile(t, e, "exit").Run(context.Background(), sandbox.RunConfig{Name: "exit"})
	var ee *sandbox.ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || ee.Trap != "" || ee.Err != nil {
		t.Fatalf("Run = %#v, want *ExitError{Code: 3}", err)
	}
}

func (s *suite) testNoAmbientAuthority(t *testing.T) {
	e, _ := s.engine(t, sandbox.Config{})
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

func (s *suite) testReactor(t *testing.T) {
	e, h := s.engine(t, sandbox.Config{})
	m := compile(t, e, "reactor")
	if got, want := m.Kind(), sandbox.Reactor; got != want {
		t.Fatalf("Kind() = %v, want %v", got, want)
	}
	ctx := context.WithValue(context.Background(), CtxKey{}, "task-42")

	if err := m.Run(ctx, sandbox.RunConfig{Name: "r"}); err != nil {
		t.Fatalf("Run(run): %v", err)
	}
	if got, want := strings.Join(h.Calls(), "|"), "task-42:hello from reactor"; got != want {
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

	if err := m.Run(ctx, sandbox.RunConfig{Entry: "nope"}); err == nil || !strings.Contains(err.Error(), `does not export "nope"`) {
		t.Errorf("Run(nope) = %v, want an error naming the entry", err)
	}
	// A Go reactor exports its memory as "memory": an entry naming it is
	// told what it names, not that nothing is exported.
	if err := m.Run(ctx, sandbox.RunConfig{Entry: "memory"}); err == nil || !strings.Contains(err.Error(), `exports "memory" as a memory, not a function`) {
		t.Errorf("Run(memory) = %v, want an error saying it is a memory", err)
	}
	// The engine survives a host panic.
	if err := m.Run(ctx, sandbox.RunConfig{}); err != nil {
		t.Errorf("Run after panic: %v", err)
	}
}

func (s *suite) testSpinStoppedAtDeadline(t *testing.T) {
	e, _ := s.engine(t, sandbox.Config{})
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
	runHello(t, compile(t, e, "hello"))
}

// testStopIsolated stops one of two spinning runs of the same module: the
// other must go on until its own deadline.
func (s *suite) testStopIsolated(t *testing.T) {
	e, _ := s.engine(t, sandbox.Config{})
	m := compile(t, e, "spin")
	// A first run's init gives the module its snapshot, compiled in the
	// background: let it, so that its compile does not compete with the
	// runs timed below.
	_ = m.Run(context.Background(), sandbox.RunConfig{Name: "warm", Timeout: 100 * time.Millisecond})
	Settled(t, m)
	const other = 1500 * time.Millisecond
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- m.Run(context.Background(), sandbox.RunConfig{Name: "other", Timeout: other}) }()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	if err := m.Run(ctx, sandbox.RunConfig{Name: "stopped"}); !errors.Is(err, sandbox.ErrCanceled) {
		t.Fatalf("Run canceled = %v, want ErrCanceled", err)
	}
	select {
	case err := <-done:
		t.Fatalf("the other run ended with the canceled one, after %v: %v", time.Since(start), err)
	default:
	}
	if err := <-done; !errors.Is(err, sandbox.ErrTimeout) {
		t.Fatalf("other Run = %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d < other {
		t.Errorf("the other run stopped after %v, before its %v deadline", d, other)
	}
}

func (s *suite) testMemoryLimit(t *testing.T) {
	e, _ := s.engine(t, sandbox.Config{})
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
	hello := compile(t, e, "hello")
	err = hello.Run(context.Background(), sandbox.RunConfig{MemoryLimit: 64 << 10, Stdout: &out})
	if !errors.Is(err, sandbox.ErrMemoryLimit) || out.Len() != 0 {
		t.Fatalf("Run with 64KiB = %v (stdout %q), want ErrMemoryLimit and no output", err, out.String())
	}
	// A limit the guest fits in is fine.
	if err := hello.Run(context.Background(), sandbox.RunConfig{MemoryLimit: 32 << 20}); err != nil {
		t.Fatalf("Run with 32MiB: %v", err)
	}
	// A guest that fails for another reason under a limit is not reported
	// as out of memory.
	err = compile(t, e, "exit").Run(context.Background(), sandbox.RunConfig{MemoryLimit: 32 << 20})
	if !errors.As(err, &ee) || ee.Code != 3 || errors.Is(err, sandbox.ErrMemoryLimit) {
		t.Fatalf("Run(exit) with 32MiB = %v, want *ExitError{Code: 3} without ErrMemoryLimit", err)
	}
}

// testRefusedGrowth checks that the memory limit is reported from a
// refused growth itself: however far below the limit the memory was, and
// never for a guest that only says "out of memory".
func (s *suite) testRefusedGrowth(t *testing.T) {
	const limit = 64 << 20
	const oom = "fatal error: out of memory\n"
	e, _ := s.engine(t, sandbox.Config{})
	for _, tt := range []struct {
		name      string
		guest     GrowthGuest
		wantTrap  bool
		wantCode  uint32
		wantLimit bool
	}{
		// 4 MiB of memory asks for 200 MiB more, past the 64 MiB limit.
		{"huge growth then trap", GrowthGuest{Pages: 64, Grow: 3200, Trap: true}, true, 0, true},
		{"huge growth then exit", GrowthGuest{Pages: 64, Grow: 3200, Stderr: oom, Exit: 2}, false, 2, true},
		// Saying so is not enough, with the memory far from the limit or
		// right under it (62 MiB).
		{"fake, far from the limit", GrowthGuest{Pages: 1, Stderr: oom, Exit: 2}, false, 2, false},
		{"fake, near the limit", GrowthGuest{Pages: 992, Stderr: oom, Exit: 2}, false, 2, false},
		{"fake trap, near the limit", GrowthGuest{Pages: 992, Trap: true}, true, 0, false},
		// A growth that succeeds up to near the limit is not refused, and
		// one refused by the module's own maximum is not the limit.
		{"grown near the limit", GrowthGuest{Pages: 1, Grow: 1000, Stderr: oom, Exit: 2}, false, 2, false},
		{"past its own maximum", GrowthGuest{Pages: 1, Max: 2, Grow: 100, Stderr: oom, Exit: 2}, false, 2, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := compileBytes(t, e, tt.name, GrowthModule(tt.guest))
			var errOut bytes.Buffer
			err := m.Run(context.Background(), sandbox.RunConfig{Name: "grow", MemoryLimit: limit, Timeout: time.Minute, Stderr: &errOut})
			var ee *sandbox.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("Run = %v, want an *ExitError", err)
			}
			if got := ee.Trap != ""; got != tt.wantTrap || ee.Code != tt.wantCode {
				t.Errorf("Run = %v, want trap %v, code %d", err, tt.wantTrap, tt.wantCode)
			}
			if got := errors.Is(err, sandbox.ErrMemoryLimit); got != tt.wantLimit {
				t.Errorf("Run = %v: memory limit %v, want %v", err, got, tt.wantLimit)
			}
			if want := tt.guest.Stderr; errOut.String() != want {
				t.Errorf("stderr = %q, want %q", errOut.String(), want)
			}
		})
	}
	// Without a limit, nothing is reported as the limit (a growth past
	// 4 GiB fails like any other).
	err := compileBytes(t, e, "no limit", GrowthModule(GrowthGuest{Pages: 1, Grow: 1<<32 - 1, Exit: 2})).Run(context.Background(), sandbox.RunConfig{Timeout: time.Minute})
	var ee *sandbox.ExitError
	if !errors.As(err, &ee) || ee.Code != 2 || errors.Is(err, sandbox.ErrMemoryLimit) {
		t.Errorf("Run without a limit = %v, want *ExitError{Code: 2} without ErrMemoryLimit", err)
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

func (s *suite) testFlood(t *testing.T) {
	e, _ := s.engine(t, sandbox.Config{})
	var w countWriter
	if err := compile(t, e, "flood").Run(context.Background(), sandbox.RunConfig{Stdout: &w, Timeout: time.Minute}); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got, want := w.n.Load(), int64(100<<20); got != want {
		t.Errorf("wrote %d bytes, want %d", got, want)
	}
}

func (s *suite) testImportRefused(t *testing.T) {
	e, _ := s.engine(t, sandbox.Config{})
	_, err := e.Compile(context.Background(), Guest("badimport"))
	if err == nil || !strings.Contains(err.Error(), "evil.steal_secrets") {
		t.Fatalf("Compile = %v, want an error naming evil.steal_secrets", err)
	}
	// A module that needs mandate_test is refused by an engine without it.
	bare := s.newEngine(t, sandbox.Config{})
	if _, err := bare.Compile(context.Background(), Guest("reactor")); err == nil || !strings.Contains(err.Error(), "mandate_test.echo") {
		t.Fatalf("Compile without host module = %v, want an error naming mandate_test.echo", err)
	}
	if _, err := bare.Compile(context.Background(), []byte("\x00asm\x01\x00\x00\x00\x0b")); err == nil {
		t.Fatalf("Compile of a truncated module succeeded")
	}
	// So is a host function imported with the wrong signature: echo takes
	// two i32s, this module imports it as () -> i32.
	wrongSig := wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec([]byte{0x60, 0x00, 0x01, 0x7f})),
		wasmasm.Section(2, wasmasm.Vec(wasmasm.Cat(wasmasm.Name("mandate_test"), wasmasm.Name("echo"), []byte{0x00, 0x00}))),
		wasmasm.Section(5, []byte{0x01, 0x00, 0x01}),
	)
	if _, err := e.Compile(context.Background(), wrongSig); err == nil || !strings.Contains(err.Error(), "mandate_test.echo") {
		t.Fatalf("Compile with a wrong signature = %v, want an error naming mandate_test.echo", err)
	}
	// A module with no memory is refused (host functions need one).
	noMem := wasmasm.Module(wasmasm.Section(1, wasmasm.Vec([]byte{0x60, 0x00, 0x00})))
	if _, err := e.Compile(context.Background(), noMem); err == nil {
		t.Fatalf("Compile of a module without memory succeeded")
	}
}

func (s *suite) testHostRegistration(t *testing.T) {
	e, h := s.engine(t, sandbox.Config{})
	if err := e.Host("mandate_test", h.Funcs()); err == nil {
		t.Errorf("second Host(mandate_test) succeeded")
	}
	if err := e.Host("wasi_snapshot_preview1", nil); err == nil {
		t.Errorf("Host(wasi_snapshot_preview1) succeeded")
	}
	if err := e.Host("bad", []sandbox.HostFunc{{Name: "f", Params: sandbox.Values(1)}}); err == nil {
		t.Errorf("Host with nil Fn succeeded")
	}
	fn := func(context.Context, sandbox.Memory, []uint64) {}
	if err := e.Host("dup", []sandbox.HostFunc{{Name: "f", Fn: fn}, {Name: "f", Fn: fn}}); err == nil {
		t.Errorf("Host with a function twice succeeded")
	}
	if err := e.Host("", nil); err == nil {
		t.Errorf("Host with an empty name succeeded")
	}
	compile(t, e, "hello")
	if err := e.Host("late", nil); err == nil {
		t.Errorf("Host after Compile succeeded")
	}
}

func (s *suite) testConcurrentRuns(t *testing.T) {
	e, h := s.engine(t, sandbox.Config{})
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
				ctx := context.WithValue(context.Background(), CtxKey{}, "g")
				if err := reactor.Run(ctx, sandbox.RunConfig{Name: "reactor"}); err != nil {
					t.Errorf("reactor: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	if got, want := len(h.Calls()), 30; got != want {
		t.Errorf("host saw %d calls, want %d", got, want)
	}
}

func cacheFiles(t testing.TB, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func (s *suite) testCompileCache(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e1, _ := s.engine(t, sandbox.Config{CacheDir: dir})
	m1 := compile(t, e1, "hello")
	m2 := compile(t, e1, "hello")
	if len(cacheFiles(t, dir)) == 0 {
		t.Fatalf("cache dir after Compile holds no file")
	}
	// Closing one handle keeps the other usable.
	m1.Close(ctx)
	if err := m2.Run(ctx, sandbox.RunConfig{}); err != nil {
		t.Fatalf("Run after closing the other handle: %v", err)
	}

	// A second engine on the same directory loads from it.
	e2, _ := s.engine(t, sandbox.Config{CacheDir: dir})
	start := time.Now()
	m3 := compile(t, e2, "hello")
	t.Logf("compile from disk cache: %v", time.Since(start))
	runHello(t, m3)
}

func (s *suite) testCorruptCache(t *testing.T) {
	corruptions := []struct {
		name string
		fn   func([]byte) []byte
	}{
		{"flipped", func(b []byte) []byte {
			for i := len(b) / 3; i < len(b)/3+64 && i < len(b); i++ {
				b[i] ^= 0x5a
			}
			return b
		}},
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }},
		{"empty", func([]byte) []byte { return nil }},
		{"garbage", func(b []byte) []byte { return bytes.Repeat([]byte("not a module "), 100) }},
	}
	// A module small enough to compile in milliseconds, so each kind of
	// damage costs two compiles of next to nothing.
	wasm := TableGrowModule(100)
	runIt := func(t *testing.T, e sandbox.Engine) {
		t.Helper()
		m := compileBytes(t, e, "table-grow", wasm)
		err := m.Run(context.Background(), sandbox.RunConfig{Timeout: time.Minute})
		var ee *sandbox.ExitError
		if !errors.As(err, &ee) || ee.Code != 1 {
			t.Fatalf("Run = %v, want *ExitError{Code: 1}", err)
		}
	}
	for _, c := range corruptions {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			runIt(t, s.newEngine(t, sandbox.Config{CacheDir: dir}))
			files := cacheFiles(t, dir)
			if len(files) == 0 {
				t.Fatal("cache dir after Compile holds no file")
			}
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(f, c.fn(b), 0o644); err != nil {
					t.Fatal(err)
				}
			}

			e2 := s.newEngine(t, sandbox.Config{CacheDir: dir})
			m, err := e2.Compile(context.Background(), wasm)
			if err != nil {
				// wazero checks its cache files (a magic, a version and a
				// CRC32 of the code) but reports a bad one as an error of
				// Compile rather than compiling again. The common part
				// is that a damaged cache never crashes the process nor
				// runs damaged code.
				if e2.Name() == "wazero" {
					t.Logf("wazero refuses the damaged cache: %v", err)
					return
				}
				t.Fatalf("Compile with a damaged cache: %v", err)
			}
			m.Close(context.Background())
			runIt(t, e2)

			// The damaged file was replaced: a third engine loads it.
			runIt(t, s.newEngine(t, sandbox.Config{CacheDir: dir}))
		})
	}
}

func (s *suite) testDeepRecursion(t *testing.T) {
	e, _ := s.engine(t, sandbox.Config{})
	m := compileBytes(t, e, "recursion", RecursionModule())
	if got, want := m.Kind(), sandbox.Reactor; got != want {
		t.Fatalf("Kind() = %v, want %v", got, want)
	}
	for i := 0; i < 2; i++ {
		err := m.Run(context.Background(), sandbox.RunConfig{Name: "deep", Timeout: time.Minute})
		var ee *sandbox.ExitError
		if !errors.As(err, &ee) || ee.Trap == "" {
			t.Fatalf("Run = %v, want *ExitError with a trap", err)
		}
		// The trap texts differ ("stack overflow" in both, in different
		// words around it); what matters is that it names the cause.
		if !strings.Contains(strings.ToLower(ee.Trap), "stack overflow") && !strings.Contains(strings.ToLower(ee.Trap), "call stack exhausted") {
			t.Errorf("Trap = %q, want a stack overflow", ee.Trap)
		}
	}
	// The engine then runs the next task normally.
	runHello(t, compile(t, e, "hello"))
}

func (s *suite) testTableGrowth(t *testing.T) {
	e, _ := s.engine(t, sandbox.Config{})
	// A growth by 2^30 elements (8 GiB of references) is refused: the guest
	// sees -1 from table.grow and goes on.
	if err := compileBytes(t, e, "table-bomb", TableGrowModule(1<<30)).Run(context.Background(), sandbox.RunConfig{Timeout: time.Minute}); err != nil {
		t.Fatalf("Run(table.grow 2^30) = %v, want nil (growth refused)", err)
	}
	// A modest growth succeeds.
	err := compileBytes(t, e, "table-grow", TableGrowModule(100)).Run(context.Background(), sandbox.RunConfig{Timeout: time.Minute})
	var ee *sandbox.ExitError
	if !errors.As(err, &ee) || ee.Code != 1 {
		t.Fatalf("Run(table.grow 100) = %v, want *ExitError{Code: 1} (grown from 0)", err)
	}
	runHello(t, compile(t, e, "hello"))
}
