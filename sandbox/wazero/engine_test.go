package wazero

import (
	"context"
	"testing"

	"github.com/tetratelabs/wazero/api"

	"github.com/mandatevm/mandate/sandbox"
	"github.com/mandatevm/mandate/sandbox/sandboxtest"
)

// newTestEngine starts an engine for a test, on the shared cache unless cfg
// names one, and closes it when the test ends.
func newTestEngine(t testing.TB, cfg sandbox.Config) *Engine {
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
	return e
}

// TestConformance runs the suite every engine passes.
func TestConformance(t *testing.T) {
	sandboxtest.Run(t, func(t testing.TB, cfg sandbox.Config) sandbox.Engine {
		return newTestEngine(t, cfg)
	})
}

// TestCompileSameModule checks that compiling the same bytes twice shares
// one compiled module.
func TestCompileSameModule(t *testing.T) {
	ctx := context.Background()
	e := newTestEngine(t, sandbox.Config{})
	m1, err := e.Compile(ctx, sandboxtest.Guest("hello"))
	if err != nil {
		t.Fatal(err)
	}
	defer m1.Close(ctx)
	m2, err := e.Compile(ctx, sandboxtest.Guest("hello"))
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close(ctx)
	if m1.(*Module).c != m2.(*Module).c {
		t.Errorf("compiling the same bytes twice compiled twice")
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
	e := newTestEngine(t, sandbox.Config{})
	inst, err := e.rt.InstantiateWithConfig(context.Background(), minimalMemoryModule, baseConfig.WithName("mem"))
	if err != nil {
		t.Fatal(err)
	}
	var mod api.Module = &fakeModule{mem: inst.Memory()}
	var sum uint32
	fn := hostAdapter("m", sandbox.HostFunc{Name: "f", Params: sandbox.Values(2), Fn: func(ctx context.Context, mem sandbox.Memory, stack []uint64) {
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
