package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/mandatevm/mandate/constraint"
	"github.com/mandatevm/mandate/kernel"
)

// BenchmarkCapCallHistory is BenchmarkCapCall on a capability with a
// `when`: a plain one, then ones reading uses (kernel/history.go), whose
// calls are recorded (copied, under the history's lock) and kept when
// they end. The history fills to kernel.MaxHistory within the first
// batch, so uses.all walks 64 uses on nearly every call.
func BenchmarkCapCallHistory(b *testing.B) {
	for _, bc := range []struct{ name, when string }{
		{"when", `size(args) == 0`},
		{"uses-size", `size(args) == 0 && size(uses) >= 0`},
		{"uses-all", `uses.all(u, u.args == args)`},
		{"uses-sum", `sum(uses.map(u, double(size(u.args)))) == 0.0`},
	} {
		b.Run(bc.name, func(b *testing.B) { benchCapCallWhen(b, bc.when) })
	}
}

func benchCapCallWhen(b *testing.B, when string) {
	e := newEnv(b, func(c *kernel.Config) { c.Constraints = constraint.New() })
	spec := e.spec(b, "bench-noop", kernel.Limits{}, fmt.Sprintf("%d 100", max(b.N, 100)))
	spec.Entry = "bench"
	cons, err := e.k.CompileConstraints("test", []string{when}, nil)
	if err != nil {
		b.Fatal(err)
	}
	spec.Grants[0].Constraints = cons
	b.ReportAllocs()
	b.ResetTimer()
	task, err := e.k.Run(context.Background(), spec)
	if err != nil {
		b.Fatalf("%v\n%s\n%s", err, task.Stderr(), task.LastError())
	}
	b.StopTimer()
	raw, _ := task.Result()
	var m map[string]float64
	if err := json.Unmarshal(raw, &m); err != nil {
		b.Fatalf("result %q: %v", raw, err)
	}
	b.ReportMetric(m["p50_ns"], "p50-ns/call")
	b.ReportMetric(m["p99_ns"], "p99-ns/call")
	b.ReportMetric(m["mean_ns"], "guest-ns/call")
}
