package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/cputime"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkFleetRuns: b.N submissions of the benefits desk (Alice's own
// record) through one NATS server to 1, 2 and 3 nodes, all in this
// process, each node running two at a time. Reported: runs per second
// end to end (submitted to final state), and the CPU time of the whole
// process (server, nodes, submitter) per run.
//
//	go test ./internal/fleet -run '^$' -bench FleetRuns -benchtime 200x -count 3
func BenchmarkFleetRuns(b *testing.B) {
	for _, nodes := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			_, f := startFleet(b)
			for i := range nodes {
				startNode(b, f, fmt.Sprintf("node-%d", i))
			}
			ctx := context.Background()
			s0, modules, err := Bundle(ctx, "../examples/benefits/alice.hcl", nil, nil, build)
			if err != nil {
				b.Fatal(err)
			}
			// Warm every node: the module fetched and compiled.
			runBatch(b, f, s0, modules, 2*nodes)
			b.ResetTimer()
			cpu0, t0 := cputime.Process(), time.Now()
			runBatch(b, f, s0, modules, b.N)
			elapsed, cpu := time.Since(t0), cputime.Process()-cpu0
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "runs/s")
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/run")
		})
	}
}

// runBatch submits n copies of s0 and waits until all are done.
func runBatch(b *testing.B, f *Fleet, s0 Submission, modules map[string][]byte, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	w, err := f.States.WatchAll(ctx, jetstream.UpdatesOnly())
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	ids := map[string]bool{}
	for range n {
		s := s0
		s.ID = newID()
		ids[s.ID] = true
		if err := f.Submit(ctx, s, modules); err != nil {
			b.Fatal(err)
		}
	}
	for len(ids) > 0 {
		select {
		case <-ctx.Done():
			b.Fatalf("%d runs did not end", len(ids))
		case e := <-w.Updates():
			if e == nil {
				continue
			}
			var st RunState
			if json.Unmarshal(e.Value(), &st) == nil && st.Final() && ids[st.ID] {
				if st.State != StateDone || st.Exit != 0 {
					b.Fatalf("%+v", st)
				}
				delete(ids, st.ID)
			}
		}
	}
}

// BenchmarkForwardedCall: a no-op capability call from a guest whose kernel
// is on this node (local) and from the same guest placed on another node,
// its every call forwarded over NATS to the owner's kernel and back
// (forwarded). Both nodes and the NATS server are in this process, on
// loopback. The guest times its own calls (bench-noop's "bench": b.N
// calls, one at a time) and reports the median and the mean per call.
//
//	go test ./internal/fleet -run '^$' -bench ForwardedCall -benchtime 2000x -count 3
func BenchmarkForwardedCall(b *testing.B) {
	_, f := startFleet(b)
	owner := runNode(b, f, "owner", host.Options{})
	runNode(b, f, "other", host.Options{})
	for _, where := range []string{"local", "forwarded"} {
		b.Run(where, func(b *testing.B) {
			on := ""
			if where == "forwarded" {
				on = "other"
			}
			_, task := startTask(b, f, owner, on, "bench-noop", nil, "bench", []byte(fmt.Sprintf("%d 1", b.N)))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			if err := task.Wait(ctx); err != nil {
				b.Fatalf("%v\n%s", err, task.Stderr())
			}
			res, _ := task.Result()
			var r struct {
				Calls int     `json:"calls"`
				Mean  float64 `json:"mean_ns"`
				P50   float64 `json:"p50_ns"`
				P90   float64 `json:"p90_ns"`
			}
			if err := json.Unmarshal(res, &r); err != nil || r.Calls != b.N {
				b.Fatalf("result %q: %v", res, err)
			}
			b.ReportMetric(r.P50, "p50-ns/call")
			b.ReportMetric(r.P90, "p90-ns/call")
			b.ReportMetric(r.Mean, "mean-ns/call")
		})
	}
}
