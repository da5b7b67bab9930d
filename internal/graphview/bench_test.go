package graphview

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mandatevm/mandate/runstore"
)

// BenchmarkSVG draws a quickstart-sized record (one task, two
// capabilities, four denials) and a 200-task one (399 capabilities, 199
// denials), Graphviz compiled already. DOT is the source alone.
func BenchmarkSVG(b *testing.B) {
	for _, bm := range []struct {
		name string
		rec  *runstore.Record
	}{{"quickstart", quickstartRecord()}, {"200tasks", wideRecord(200)}} {
		b.Run(bm.name, func(b *testing.B) {
			svg(b, bm.rec) // compiled, and the cache warm
			b.ReportAllocs()
			size := 0
			for b.Loop() {
				size = len(svg(b, bm.rec))
			}
			b.ReportMetric(float64(size), "bytes/svg")
		})
		b.Run(bm.name+"/dot", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = buildDOT(bm.rec)
			}
		})
	}
}

// BenchmarkFirstSVG is the first SVG of a process: Graphviz compiled
// (cold: an empty cache directory) or loaded from the cache (warm), then
// one quickstart-sized drawing. Each iteration is a new process; the
// metric is measured inside it (process start not included).
func BenchmarkFirstSVG(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for _, warm := range []bool{false, true} {
		name := "cold"
		if warm {
			name = "warm"
		}
		b.Run(name, func(b *testing.B) {
			cache := filepath.Join(b.TempDir(), "graphviz")
			var total time.Duration
			n := 0
			if warm {
				firstSVG(b, exe, cache) // fills the cache
			}
			for b.Loop() {
				if !warm {
					os.RemoveAll(cache)
				}
				total += firstSVG(b, exe, cache)
				n++
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(n), "ms/first-svg")
		})
	}
}

// firstSVG runs TestFirstSVGChild in a new process and returns the time
// it measured.
func firstSVG(b *testing.B, exe, cache string) time.Duration {
	cmd := exec.Command(exe, "-test.run=^TestFirstSVGChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "GRAPHVIEW_FIRST_SVG_CACHE="+cache)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("child: %v\n%s", err, out)
	}
	_, after, ok := strings.Cut(string(out), "first-svg-ns=")
	if !ok {
		b.Fatalf("child said:\n%s", out)
	}
	ns, err := strconv.ParseInt(strings.Fields(after)[0], 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return time.Duration(ns)
}

// TestFirstSVGChild is BenchmarkFirstSVG's child process.
func TestFirstSVGChild(t *testing.T) {
	cache := os.Getenv("GRAPHVIEW_FIRST_SVG_CACHE")
	if cache == "" {
		t.Skip("run by BenchmarkFirstSVG")
	}
	start := time.Now()
	if _, err := SVG(context.Background(), quickstartRecord(), Options{CacheDir: cache}); err != nil {
		t.Fatal(err)
	}
	t.Logf("first-svg-ns=%d", time.Since(start).Nanoseconds())
}
