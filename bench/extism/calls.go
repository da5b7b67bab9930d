package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	extism "github.com/extism/go-sdk"
	"github.com/hashicorp/go-hclog"

	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/cputime"
	"github.com/mandatevm/mandate/internal/guestbuild"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/internal/lifecycle"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox"
)

// The call round trip: one instance making n host calls, on each side.
//
//   - Mandate: a kernel task running testdata/guests/bench-noop's "bench",
//     which makes n cap_calls of the test kind's no-op operation
//     (internal/kerneltest) through the whole mediation pipeline (handle,
//     revocation, the kind's Prepare, reservation, flow, audit decision).
//   - Extism: an instance of guests/go-calls, the twin guest, whose "bench"
//     calls the host function "noop" (one i64 in, one out; it does
//     nothing) n times.
//
// The process's CPU time over the run, and its wall time (instance start
// included in both: a few milliseconds over n calls), give the figures
// per call. (The guests also time batches of 100 calls with their own
// clock, as bench-noop does for the kernel's BenchmarkCapCall, but
// Extism's wazero gives its guests wazero's default clock, which is not
// the time: it advances a millisecond at each reading.)

// callResult is one run of n calls.
type callResult struct {
	calls int
	cpu   time.Duration // the process's, over the run
	wall  time.Duration // over the run
}

// cpuPerCall is the process's CPU time per call, in ns.
func (r callResult) cpuPerCall() float64 {
	return float64(r.cpu.Nanoseconds()) / float64(max(r.calls, 1))
}

// wallPerCall is the wall time per call, in ns.
func (r callResult) wallPerCall() float64 {
	return float64(r.wall.Nanoseconds()) / float64(max(r.calls, 1))
}

// callRunner is one side of the call comparison.
type callRunner struct {
	name  string
	run   func(ctx context.Context, n int) (callResult, error)
	close func(ctx context.Context)
}

// checkReport checks what both guests output: as many calls as asked.
func checkReport(out []byte, n int) error {
	var r struct {
		Calls float64 `json:"calls"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return fmt.Errorf("guest output %q: %w", out, err)
	}
	if int(r.Calls) != n {
		return fmt.Errorf("guest made %v calls, want %d", r.Calls, n)
	}
	return nil
}

// newMandateCalls is Mandate's side on a new engine of the given name
// (a kernel registers its host functions on a fresh engine).
func newMandateCalls(ctx context.Context, engine, cacheDir string) (callRunner, error) {
	eng, err := host.NewEngine(ctx, engine, cacheDir)
	if err != nil {
		return callRunner{}, err
	}
	r, err := mandateCalls(ctx, eng)
	if err != nil {
		eng.Close(ctx)
		return callRunner{}, err
	}
	r.name = "mandate/" + engine
	r.close = func(ctx context.Context) { eng.Close(ctx) }
	return r, nil
}

func mandateCalls(ctx context.Context, eng sandbox.Engine) (callRunner, error) {
	k, err := kernel.New(kernel.Config{
		Engine: eng,
		Kinds:  []kindapi.Kind{kerneltest.New()},
		Logger: hclog.NewNullLogger(),
	})
	if err != nil {
		return callRunner{}, err
	}
	scope, err := k.Grant("test", kindapi.GrantContext{}, []byte(`{"level":5}`))
	if err != nil {
		return callRunner{}, err
	}
	root, err := lifecycle.GuestsDir()
	if err != nil {
		return callRunner{}, err
	}
	wasm, _, err := guestbuild.Build(ctx, filepath.Join(root, "bench-noop"), guestbuild.Options{Reactor: true})
	if err != nil {
		return callRunner{}, fmt.Errorf("building bench-noop: %w", err)
	}
	limits := kernel.Limits{Timeout: 10 * time.Minute}
	mod, err := eng.CompileWith(ctx, wasm, limits.CompileLimits())
	if err != nil {
		return callRunner{}, err
	}
	spec := kernel.TaskSpec{
		Module:    mod,
		Principal: "bench",
		Name:      "calls",
		Entry:     "bench",
		Limits:    limits,
		Grants:    []kernel.GrantSpec{{Name: "test", Kind: "test", Scope: scope}},
	}
	return callRunner{run: func(ctx context.Context, n int) (callResult, error) {
		spec := spec
		spec.Input = fmt.Appendf(nil, "%d 100", n)
		cpu, start := cputime.Process(), time.Now()
		t, err := k.Run(ctx, spec)
		cpu, wall := cputime.Process()-cpu, time.Since(start)
		if err != nil {
			if t != nil {
				err = fmt.Errorf("%w\n%s", err, t.Stderr().Data)
			}
			return callResult{}, err
		}
		out, _ := t.Result()
		if err := checkReport(out, n); err != nil {
			return callResult{}, err
		}
		return callResult{calls: n, cpu: cpu, wall: wall}, k.Forget(t)
	}}, nil
}

// newExtismCalls is Extism's side.
func newExtismCalls(ctx context.Context) (callRunner, error) {
	noop := extism.NewHostFunctionWithStack("noop", func(_ context.Context, _ *extism.CurrentPlugin, stack []uint64) {
		stack[0] = 0
	}, []extism.ValueType{extism.ValueTypeI64}, []extism.ValueType{extism.ValueTypeI64})
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return callRunner{}, errors.New("extism: cannot locate guests/")
	}
	dir := filepath.Join(filepath.Dir(file), "guests", "go-calls")
	wasm, _, err := guestbuild.Build(ctx, dir, guestbuild.Options{Reactor: true})
	if err != nil {
		return callRunner{}, fmt.Errorf("extism: building %s: %w", dir, err)
	}
	p, err := extism.NewCompiledPlugin(ctx,
		extism.Manifest{Wasm: []extism.Wasm{extism.WasmData{Data: wasm}}},
		extism.PluginConfig{EnableWasi: true},
		[]extism.HostFunction{noop})
	if err != nil {
		return callRunner{}, fmt.Errorf("extism: compiling go-calls: %w", err)
	}
	return callRunner{
		name: "extism",
		run: func(ctx context.Context, n int) (callResult, error) {
			cpu, start := cputime.Process(), time.Now()
			inst, err := p.Instance(ctx, extism.PluginInstanceConfig{})
			if err != nil {
				return callResult{}, fmt.Errorf("extism: instance: %w", err)
			}
			defer inst.Close(ctx)
			rc, out, err := inst.CallWithContext(ctx, "bench", fmt.Appendf(nil, "%d 100", n))
			cpu, wall := cputime.Process()-cpu, time.Since(start)
			if err != nil || rc != 0 {
				return callResult{}, fmt.Errorf("extism: bench = %d, %v", rc, err)
			}
			if err := checkReport(out, n); err != nil {
				return callResult{}, fmt.Errorf("extism: %w", err)
			}
			return callResult{calls: n, cpu: cpu, wall: wall}, nil
		},
		close: func(ctx context.Context) { p.Close(ctx) },
	}, nil
}

// callRounds runs n calls on every runner, rounds times, each round
// starting with a different runner, and prints the table.
func callRounds(ctx context.Context, runners []callRunner, n, rounds int) error {
	for _, r := range runners { // warm up
		if _, err := r.run(ctx, min(n, 10_000)); err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
	}
	results := map[string][]callResult{}
	for round := range rounds {
		for i := range runners {
			r := runners[(i+round)%len(runners)]
			res, err := r.run(ctx, n)
			if err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			results[r.name] = append(results[r.name], res)
		}
	}
	ext := runners[len(runners)-1].name
	fmt.Printf("\nA host call: one instance making %d calls, Mandate's cap_call of a no-op operation against an Extism host function "+
		"that does nothing (median of %d rounds, min-max), and Mandate's over Extism's (>1: Mandate costs more):\n\n", n, rounds)
	names := make([]string, len(runners))
	for i, r := range runners {
		names[i] = r.name
	}
	var ratioNames []string
	for _, r := range runners[:len(runners)-1] {
		ratioNames = append(ratioNames, r.name+" / "+ext)
	}
	fmt.Printf("| per call | %s | %s |\n|---|%s\n", strings.Join(names, " | "), strings.Join(ratioNames, " | "), strings.Repeat("---|", len(names)+len(ratioNames)))
	for _, row := range []struct {
		what string
		f    func(callResult) float64
	}{
		{"CPU (the process's)", callResult.cpuPerCall},
		{"wall time", callResult.wallPerCall},
	} {
		var cells, ratios []string
		med := map[string]float64{}
		for _, r := range runners {
			var vals []float64
			for _, res := range results[r.name] {
				vals = append(vals, row.f(res))
			}
			med[r.name] = median(vals)
			cells = append(cells, spread(vals, "%.0f ns"))
		}
		for _, r := range runners[:len(runners)-1] {
			ratios = append(ratios, fmt.Sprintf("%.2f", med[r.name]/med[ext]))
		}
		fmt.Printf("| %s | %s | %s |\n", row.what, strings.Join(cells, " | "), strings.Join(ratios, " | "))
	}
	return nil
}
