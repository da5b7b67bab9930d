package mcp_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mandatevm/mandate/caps/mcp/internal/fixture"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkUpstreamCall is one tools/call of the fixture's echo tool over
// Streamable HTTP on loopback: direct, the Go SDK's client calling it;
// mediated, the same call made by a task through the kernel's mcp
// capability (prepare, reserve, flow, constraints, audit in memory, the
// effect, the result blob). The difference is what mediation costs a
// call. Each reports the median (p50-ns) and p99 (p99-ns) of its calls.
//
//	go test ./caps/mcp -run '^$' -bench UpstreamCall -benchtime 300x
func BenchmarkUpstreamCall(b *testing.B) {
	args := map[string]any{"text": "hello"}
	b.Run("direct", func(b *testing.B) {
		f := fixture.New()
		url := f.Start(b)
		ctx := context.Background()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		measure(b, func() error {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: fixture.ToolEcho, Arguments: args})
			return err
		})
	})
	b.Run("mediated", func(b *testing.B) {
		_, base := httpFixture(b)
		e := newKenv(b, grant{name: "up", spec: spec(base, pinned(b, base, fixture.ToolEcho))})
		measure(b, func() error {
			_, _, err := e.call("up", fixture.ToolEcho, args)
			return err
		})
	})
}

// measure runs call b.N times (after one warm-up call) and reports the
// median and p99 of the calls.
func measure(b *testing.B, call func() error) {
	b.Helper()
	if err := call(); err != nil {
		b.Fatal(err)
	}
	d := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		if err := call(); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(d)
	if len(d) > 0 {
		b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(d[len(d)*99/100].Nanoseconds()), "p99-ns")
	}
}
