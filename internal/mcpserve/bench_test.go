package mcpserve

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mandatevm/mandate/kernel"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkToolCall is a no-op tool call (mcp-tool's op "echo"), one at
// a time and four at once:
//
//   - kernel: the task alone, as Session.call makes it (NewChild, the
//     input, Start, Wait) on the same module and limits: what spawning
//     the task costs;
//   - in-memory: the whole call from the Go SDK's client through the
//     session, over the SDK's in-memory transport (JSON-RPC both ways,
//     the argument checks, the task, the result).
//
// Over stdio (the built binary) and Streamable HTTP, with the run store
// and logs of "mandate mcp serve", see BenchmarkMCPToolCall in
// internal/cli. Reports calls/s and the p50 and p99 of the calls'
// latencies.
func BenchmarkToolCall(b *testing.B) {
	r := newHostileRig(b, 0)
	tool := r.tool("echo")
	s, cs := startHostileSession(b, r.k, []*Tool{tool}, nil, nil)
	input := []byte(`{"op":"echo","text":"hi"}`)
	spawn := func() error {
		p, err := r.k.NewChild(s.Task(), kernel.TaskSpec{Module: tool.Module, Principal: s.Task().Principal(), Name: tool.Name,
			Entry: tool.Entry, Limits: tool.Limits})
		if err != nil {
			return err
		}
		if err := p.SetInput(input, kernel.Label{}); err != nil {
			return err
		}
		if err := p.Start(context.Background()); err != nil {
			return err
		}
		t := p.Task()
		if err := t.Wait(context.Background()); err != nil {
			return err
		}
		if string(t.ResultBlob().Bytes()) != "hi" {
			b.Fatalf("result %q", t.ResultBlob().Bytes())
		}
		return nil
	}
	call := func() error {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(input)})
		if err != nil {
			return err
		}
		if res.IsError || text(res) != "hi" {
			b.Fatalf("echo: %s", text(res))
		}
		return nil
	}
	for _, bc := range []struct {
		name string
		f    func() error
		conc int
	}{{"kernel", spawn, 1}, {"in-memory", call, 1}, {"kernel/concurrent-4", spawn, 4}, {"in-memory/concurrent-4", call, 4}} {
		b.Run(bc.name, func(b *testing.B) { benchToolCalls(b, bc.conc, bc.f) })
	}
}

// benchToolCalls makes b.N calls of f from conc goroutines and reports the
// calls per second and the p50 and p99 latency.
func benchToolCalls(b *testing.B, conc int, f func() error) {
	for range 5 { // warm: the engine's first instances, the client
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	durs := make([]time.Duration, b.N)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				t0 := time.Now()
				if err := f(); err != nil {
					b.Error(err)
					return
				}
				durs[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(durs)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
	b.ReportMetric(us(durs[len(durs)/2]), "p50-µs")
	b.ReportMetric(us(durs[min(len(durs)-1, len(durs)*99/100)]), "p99-µs")
}
