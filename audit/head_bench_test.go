package audit

import (
	"context"
	"testing"
)

// BenchmarkCheckHead is what a run pays at start to check its log: a
// 2,000-entry log with a checkpoint (quick_check reads every page: it
// grows with the file; the hash checks are O(log n) and O(entries since
// the last checkpoint)).
func BenchmarkCheckHead(b *testing.B) {
	l, _ := open(b)
	a := l.ForRun("r1")
	ctx := context.Background()
	for i := range 2000 {
		if err := a.Record(ctx, event(i)); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := l.Checkpoint(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := l.CheckHead(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
