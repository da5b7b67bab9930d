package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/debug"

	extism "github.com/extism/go-sdk"

	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/lifecycle"
	"github.com/mandatevm/mandate/internal/wasmasm"
)

// Extism's side of the comparison: per task, a new instance of a compiled
// plugin (CompiledPlugin.Instance), one call of its function, which calls
// the host function "declassify" once and sets its output, and Close. The
// host function copies the input block into a new block, as the kernel's
// declassify makes a new blob; it checks nothing (Extism has no
// capabilities, labels, audit or limits to check), and Extism's default
// configuration has no timeout, so its wazero runs without the deadline
// checks Mandate's always has.

// extismBench is one compiled plugin per guest.
type extismBench struct {
	plugins map[lifecycle.Guest]*extism.CompiledPlugin
}

// extismFunc is the function a task of g calls.
func extismFunc(g lifecycle.Guest) string {
	if g == lifecycle.GoCommand {
		return "_start"
	}
	return "run"
}

func newExtism(ctx context.Context) (*extismBench, error) {
	declassify := extism.NewHostFunctionWithStack("declassify", func(_ context.Context, p *extism.CurrentPlugin, stack []uint64) {
		in, err := p.ReadBytes(stack[0])
		if err != nil {
			panic(err)
		}
		out, err := p.WriteBytes(in)
		if err != nil {
			panic(err)
		}
		stack[0] = out
	}, []extism.ValueType{extism.ValueTypeI64}, []extism.ValueType{extism.ValueTypeI64})

	e := &extismBench{plugins: map[lifecycle.Guest]*extism.CompiledPlugin{}}
	for _, g := range lifecycle.Guests {
		wasm, err := extismModule(ctx, g)
		if err != nil {
			return nil, err
		}
		p, err := extism.NewCompiledPlugin(ctx,
			extism.Manifest{Wasm: []extism.Wasm{extism.WasmData{Data: wasm}}},
			extism.PluginConfig{EnableWasi: g != lifecycle.Tiny},
			[]extism.HostFunction{declassify})
		if err != nil {
			return nil, fmt.Errorf("extism: compiling %s: %w", g, err)
		}
		e.plugins[g] = p
	}
	return e, nil
}

func (e *extismBench) Close(ctx context.Context) {
	for _, p := range e.plugins {
		p.Close(ctx)
	}
}

// extismModule is the Extism twin of lifecycle.Module(g).
func extismModule(ctx context.Context, g lifecycle.Guest) ([]byte, error) {
	if g == lifecycle.Tiny {
		return extismTiny(), nil
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return nil, errors.New("extism: cannot locate guests/")
	}
	dir := filepath.Join(filepath.Dir(file), "guests", string(g))
	wasm, _, err := guestbuild.Build(ctx, dir, guestbuild.Options{Reactor: g == lifecycle.GoReactor})
	if err != nil {
		return nil, fmt.Errorf("extism: building %s: %w", dir, err)
	}
	return wasm, nil
}

// extismTiny is go-reactor's "run" hand-assembled, with no runtime and no
// memory of its own (Extism's blocks live in its kernel's memory).
func extismTiny() []byte {
	imp := func(module, name string, typ byte) []byte {
		return wasmasm.Cat(wasmasm.Name(module), wasmasm.Name(name), []byte{0x00, typ})
	}
	code := []byte{
		0x10, 0x00, // call input_offset
		0x10, 0x01, // call declassify
		0x22, 0x00, 0x20, 0x00, // local.tee 0; local.get 0
		0x10, 0x02, // call length
		0x10, 0x03, // call output_set
		0x41, 0x00, // i32.const 0
	}
	body := wasmasm.Cat([]byte{0x01, 0x01, 0x7e}, code, []byte{0x0b}) // one i64 local
	return wasmasm.Module(
		wasmasm.Section(1, wasmasm.Vec(
			[]byte{0x60, 0x00, 0x01, 0x7e},       // 0: () -> i64
			[]byte{0x60, 0x01, 0x7e, 0x01, 0x7e}, // 1: (i64) -> i64
			[]byte{0x60, 0x02, 0x7e, 0x7e, 0x00}, // 2: (i64, i64) -> ()
			[]byte{0x60, 0x00, 0x01, 0x7f},       // 3: () -> i32
		)),
		wasmasm.Section(2, wasmasm.Vec(
			imp("extism:host/env", "input_offset", 0),
			imp("extism:host/user", "declassify", 1),
			imp("extism:host/env", "length", 1),
			imp("extism:host/env", "output_set", 2),
		)),
		wasmasm.Section(3, wasmasm.Vec([]byte{0x03})),
		wasmasm.Section(7, wasmasm.Vec(wasmasm.Cat(wasmasm.Name("run"), []byte{0x00, 0x04}))),
		wasmasm.Section(10, wasmasm.Vec(wasmasm.Cat(wasmasm.Uleb(uint64(len(body))), body))),
	)
}

// task runs one task of g: a new instance, its call, its output, Close.
func (e *extismBench) task(ctx context.Context, g lifecycle.Guest) error {
	p, err := e.plugins[g].Instance(ctx, extism.PluginInstanceConfig{})
	if err != nil {
		return fmt.Errorf("extism: %s: instance: %w", g, err)
	}
	defer p.Close(ctx)
	rc, out, err := p.CallWithContext(ctx, extismFunc(g), []byte(lifecycle.Input))
	if err != nil || rc != 0 || string(out) != lifecycle.Input {
		return fmt.Errorf("extism: %s: call = %d, %q, %v; want 0 and the input", g, rc, out, err)
	}
	return nil
}

// run runs n tasks of g on workers goroutines, as lifecycle.Bench.Run.
func (e *extismBench) run(ctx context.Context, g lifecycle.Guest, n, workers int) (lifecycle.Result, error) {
	return lifecycle.Measure(n, workers, func() error { return e.task(ctx, g) })
}

// idleRSS is lifecycle.Bench.IdleRSS for Extism: n instances of the Go
// reactor, each called once at "idle" (which starts its Go runtime), kept
// open while the resident set is read.
func (e *extismBench) idleRSS(ctx context.Context, n int) (float64, error) {
	settle := func() int64 {
		runtime.GC()
		debug.FreeOSMemory()
		return lifecycle.RSS()
	}
	before := settle()
	plugins := make([]*extism.Plugin, 0, n)
	defer func() {
		for _, p := range plugins {
			p.Close(ctx)
		}
	}()
	for range n {
		p, err := e.plugins[lifecycle.GoReactor].Instance(ctx, extism.PluginInstanceConfig{})
		if err != nil {
			return 0, err
		}
		plugins = append(plugins, p)
		if rc, _, err := p.CallWithContext(ctx, "idle", nil); err != nil || rc != 0 {
			return 0, fmt.Errorf("extism: idle = %d, %v", rc, err)
		}
	}
	after := settle()
	if before == 0 || after == 0 {
		return 0, nil
	}
	return float64(after-before) / float64(n), nil
}
