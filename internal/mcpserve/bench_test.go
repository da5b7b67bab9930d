package mcpserve

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mandatevm/mandate/internal/cputime"
	"github.com/mandatevm/mandate/internal/kerneltest"
	"github.com/mandatevm/mandate/kernel"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkToolCall is a no-op tool call (mcp-tool's op "echo"), one at
// a time and four at once:
//
//   - kernel: the task alone, as Session.call makes it (StartChild with
//     the input, then Wait) on the same module and limits: what spawning
//     the task costs;
//   - in-memory: the whole call from the Go SDK's client through the
//     session, over the SDK's in-memory transport (JSON-RPC both ways,
//     the argument checks, the task, the result).
//
// Over stdio (the built binary) and Streamable HTTP, with the run store
// and logs of "mandate mcp serve", see BenchmarkMCPToolCall in
// internal/cli. Reports calls/s, the p50 and p99 of the calls'
// latencies, and the CPU per call of the whole process (client and
// server both, in-memory; the 5 warm-up calls counted in).
func BenchmarkToolCall(b *testing.B) {
	r := newHostileRig(b, 0)
	tool := r.tool("echo")
	s, cs := startHostileSession(b, r.k, []*Tool{tool}, nil, nil)
	input := []byte(`{"op":"echo","text":"hi"}`)
	spawn := func() error {
		t, err := s.Task().StartChild(context.Background(), kernel.ChildSpec{Module: tool.Module, Name: tool.Name,
			Entry: tool.Entry, Limits: tool.Limits, Input: input})
		if err != nil {
			return err
		}
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
		b.Run(bc.name, func(b *testing.B) {
			cpu := cputime.Process()
			kerneltest.BenchCalls(b, bc.conc, 5, bc.f)
			b.ReportMetric(float64(cputime.Process()-cpu)/1e3/float64(b.N+5), "cpu-µs/call")
		})
	}
}
