// Command extism runs Mandate's task lifecycle (internal/lifecycle) and
// Extism's equivalent (a new instance of a compiled plugin, one call that
// makes one host function call and sets its output, Close) in interleaved
// rounds on this machine, then the call round trip (one instance making
// many host calls, calls.go), and prints the figures and their ratios as
// Markdown tables (BENCHMARKS.md, "Task lifecycle").
//
//	./run.sh                       # both of Mandate's engines (cgo) and Extism
//	ENGINES=wazero ./run.sh -rounds 3
//
// It is a module of its own (go.mod here), so that Mandate never depends on
// Extism's SDK; it reaches Mandate's internal packages through the replace
// directive (an internal package may be imported from below its parent's
// import path, whichever module the importer is in).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mandatevm/mandate/host"
	"github.com/mandatevm/mandate/internal/lifecycle"
)

var (
	rounds      = flag.Int("rounds", 5, "interleaved rounds")
	goTasks     = flag.Int("go-tasks", 1000, "tasks of a Go guest per measurement")
	tinyTasks   = flag.Int("tiny-tasks", 10000, "tasks of the tiny guest per measurement")
	workerList  = flag.String("workers", "1,2", "worker counts, comma-separated")
	idle        = flag.Int("idle", 200, "idle Go tasks (instances) per RSS measurement; 0: none")
	engineList  = flag.String("engines", strings.Join(host.EngineNames(), ","), "Mandate's engines, comma-separated")
	cpuProfile  = flag.String("cpuprofile", "", "write a CPU profile of the whole run here")
	lifecycleOn = flag.Bool("lifecycle", true, "measure the task lifecycle")
	callCount   = flag.Int("calls", 1_000_000, "host calls per measurement of the call round trip (one instance each); 0: none")
)

// runner is one side of the comparison.
type runner struct {
	name string
	run  func(ctx context.Context, g lifecycle.Guest, n, workers int) (lifecycle.Result, error)
	idle func(ctx context.Context, n int) (float64, error)
}

func main() {
	flag.Parse()
	if err := mainErr(); err != nil {
		fmt.Fprintln(os.Stderr, "extism:", err)
		os.Exit(1)
	}
}

func mainErr() error {
	ctx := context.Background()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var workers []int
	for _, w := range strings.Split(*workerList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 1 {
			return fmt.Errorf("-workers: %q is not a count", w)
		}
		workers = append(workers, n)
	}

	cache, err := os.MkdirTemp("", "mandate-extism-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(cache)
	fmt.Printf("Machine: %s, %d CPUs, %s/%s, %s, %s\n", cpuModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Printf("Load average at start: %s\n", loadAvg())
	fmt.Printf("Command: %s\n\n", strings.Join(os.Args, " "))

	if *lifecycleOn {
		if err := lifecycleBench(ctx, cache, workers); err != nil {
			return err
		}
	}
	if *callCount > 0 {
		var runners []callRunner
		for _, name := range strings.Split(*engineList, ",") {
			r, err := newMandateCalls(ctx, name, cache+"/calls-"+name)
			if err != nil {
				return err
			}
			defer r.close(ctx)
			runners = append(runners, r)
		}
		r, err := newExtismCalls(ctx)
		if err != nil {
			return err
		}
		defer r.close(ctx)
		runners = append(runners, r)
		if err := callRounds(ctx, runners, *callCount, *rounds); err != nil {
			return err
		}
	}
	fmt.Printf("\nLoad average at end: %s\n", loadAvg())
	return nil
}

// lifecycleBench runs the task lifecycle on every side and prints its
// tables.
func lifecycleBench(ctx context.Context, cache string, workers []int) error {
	var runners []runner
	for _, name := range strings.Split(*engineList, ",") {
		eng, err := host.NewEngine(ctx, name, cache+"/"+name)
		if err != nil {
			return err
		}
		defer eng.Close(ctx)
		b, err := lifecycle.New(ctx, eng)
		if err != nil {
			return err
		}
		runners = append(runners, runner{name: "mandate/" + name, run: b.Run, idle: b.IdleRSS})
	}
	ext, err := newExtism(ctx)
	if err != nil {
		return err
	}
	defer ext.Close(ctx)
	runners = append(runners, runner{name: "extism", run: ext.run, idle: ext.idleRSS})

	// Warm up: fault memory in, fill the engines' caches.
	for _, r := range runners {
		for _, g := range lifecycle.Guests {
			if _, err := r.run(ctx, g, 20, 2); err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
		}
	}

	type key struct {
		runner  string
		guest   lifecycle.Guest
		workers int
	}
	results := map[key][]lifecycle.Result{}
	for round := range *rounds {
		for _, g := range lifecycle.Guests {
			n := *goTasks
			if g == lifecycle.Tiny {
				n = *tinyTasks
			}
			for _, w := range workers {
				for i := range runners {
					r := runners[(i+round)%len(runners)] // a different first runner each round
					res, err := r.run(ctx, g, n, w)
					if err != nil {
						return fmt.Errorf("%s: %w", r.name, err)
					}
					k := key{r.name, g, w}
					results[k] = append(results[k], res)
				}
			}
		}
		fmt.Fprintf(os.Stderr, "round %d of %d done\n", round+1, *rounds)
	}
	rss := map[string][]float64{}
	if *idle > 0 {
		for round := range min(*rounds, 3) {
			for i := range runners {
				r := runners[(i+round)%len(runners)]
				per, err := r.idle(ctx, *idle)
				if err != nil {
					return fmt.Errorf("%s: idle: %w", r.name, err)
				}
				rss[r.name] = append(rss[r.name], per)
			}
		}
	}

	ext0 := runners[len(runners)-1].name
	fmt.Printf("CPU per task (median of %d rounds, min-max), and Extism's CPU per task over Mandate's (>1: Mandate is cheaper):\n\n", *rounds)
	header(runners, "CPU per task")
	for _, g := range lifecycle.Guests {
		for _, w := range workers {
			var cells, ratios []string
			med := map[string]float64{}
			for _, r := range runners {
				cpu := func(x lifecycle.Result) float64 { return float64(x.CPUPerTask().Microseconds()) }
				vals := collect(results[key{r.name, g, w}], cpu)
				med[r.name] = median(vals)
				cells = append(cells, spread(vals, "%.0f µs"))
			}
			for _, r := range runners[:len(runners)-1] {
				ratios = append(ratios, fmt.Sprintf("%.2f", med[ext0]/med[r.name]))
			}
			fmt.Printf("| %s | %d | %s | %s |\n", g, w, strings.Join(cells, " | "), strings.Join(ratios, " | "))
		}
	}
	fmt.Printf("\nTasks per second (wall time; median, min-max), and Mandate's over Extism's (>1: Mandate is faster):\n\n")
	header(runners, "tasks/s")
	for _, g := range lifecycle.Guests {
		for _, w := range workers {
			var cells, ratios []string
			med := map[string]float64{}
			for _, r := range runners {
				vals := collect(results[key{r.name, g, w}], lifecycle.Result.TasksPerSecond)
				med[r.name] = median(vals)
				cells = append(cells, spread(vals, "%.0f"))
			}
			for _, r := range runners[:len(runners)-1] {
				ratios = append(ratios, fmt.Sprintf("%.2f", med[r.name]/med[ext0]))
			}
			fmt.Printf("| %s | %d | %s | %s |\n", g, w, strings.Join(cells, " | "), strings.Join(ratios, " | "))
		}
	}
	if *idle > 0 {
		fmt.Printf("\nResident set per idle Go task (%d tasks or instances at once; median, min-max), and Extism's over Mandate's:\n\n", *idle)
		var cells, ratios []string
		for _, r := range runners {
			cells = append(cells, spread(scale(rss[r.name], 1.0/(1<<20)), "%.2f MiB"))
		}
		for _, r := range runners[:len(runners)-1] {
			ratios = append(ratios, fmt.Sprintf("%.2f", median(rss[ext0])/median(rss[r.name])))
		}
		names := make([]string, len(runners))
		for i, r := range runners {
			names[i] = r.name
		}
		fmt.Printf("| %s | %s |\n|%s\n", strings.Join(names, " | "), ratioNames(runners), strings.Repeat("---|", 2*len(runners)-1))
		fmt.Printf("| %s | %s |\n", strings.Join(cells, " | "), strings.Join(ratios, " | "))
	}
	return nil
}

func header(runners []runner, what string) {
	var names []string
	for _, r := range runners {
		names = append(names, r.name+" "+what)
	}
	fmt.Printf("| guest | workers | %s | %s |\n", strings.Join(names, " | "), ratioNames(runners))
	fmt.Printf("|---|---|%s\n", strings.Repeat("---|", 2*len(runners)-1))
}

func ratioNames(runners []runner) string {
	var out []string
	for _, r := range runners[:len(runners)-1] {
		out = append(out, "ratio "+strings.TrimPrefix(r.name, "mandate/"))
	}
	return strings.Join(out, " | ")
}

func collect(rs []lifecycle.Result, f func(lifecycle.Result) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}

func scale(xs []float64, k float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x * k
	}
	return out
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// spread is "median (min-max)" in format f.
func spread(xs []float64, f string) string {
	if len(xs) == 0 {
		return "-"
	}
	return fmt.Sprintf(f+" ("+f+"–"+f+")", median(xs), slices.Min(xs), slices.Max(xs))
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, l := range strings.Split(string(b), "\n") {
		if name, ok := strings.CutPrefix(l, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
		}
	}
	return runtime.GOARCH
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}
