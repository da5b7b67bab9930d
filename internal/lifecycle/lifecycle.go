// Package lifecycle measures what a whole task costs in the kernel: its
// start, one capability call, its result and its teardown, on a real
// kernel with a real capability kind (caps/declassify, in memory: no I/O
// of its own to measure) and real guests (testdata/guests/bench-lifecycle
// and bench-lifecycle-cmd, and the hand-assembled TinyModule). The
// benchmarks of this package and bench/extism (the comparison with
// Extism's Go SDK) both run it; BENCHMARKS.md ("Task lifecycle") has the
// figures.
//
//	eng, _ := host.NewEngine(ctx, "wazero", cacheDir)
//	b, _ := lifecycle.New(ctx, eng)
//	res, _ := b.Run(ctx, lifecycle.GoReactor, 1000, 2) // 1,000 tasks, 2 workers
//	fmt.Println(res.CPUPerTask(), res.TasksPerSecond())
//
// Each task is a kernel task with one grant, "d", a declassify capability
// that may drop the tag of the task's input: the guest looks the grant
// up, takes its input blob, declassifies it (one cap_call, which goes
// through the whole mediation pipeline: an audited use of a declassifier)
// and makes the lowered blob its result. The host checks the result and
// forgets the task.
package lifecycle

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mandatevm/mandate/caps/declassify"
	"github.com/mandatevm/mandate/internal/cputime"
	"github.com/mandatevm/mandate/kernel"
	"github.com/mandatevm/mandate/kernel/kindapi"
	"github.com/mandatevm/mandate/sandbox"
)

// Input is every task's input, labelled with InputTag.
const Input = `{"listing":"an untrusted page"}`

// InputTag is the confidentiality tag of the input, which "d" drops.
const InputTag = "untrusted:page"

// MaxTasks is the kernel's bound on tasks running at once: enough for
// IdleRSS.
const MaxTasks = 10_000

// Bench is a kernel on one engine with the guests compiled, ready to run
// lifecycle tasks. Safe for concurrent use.
type Bench struct {
	k     *kernel.Kernel
	specs map[Guest]kernel.TaskSpec
	idle  kernel.TaskSpec
}

// New makes a kernel on eng, which must be fresh (the kernel registers its
// host functions), and compiles every guest on it.
func New(ctx context.Context, eng sandbox.Engine) (*Bench, error) {
	k, err := kernel.New(kernel.Config{
		Engine:        eng,
		Kinds:         []kindapi.Kind{declassify.New()},
		Declassifiers: []string{declassify.KindName},
		Logger:        hclog.NewNullLogger(),
		MaxTasks:      MaxTasks,
	})
	if err != nil {
		return nil, err
	}
	scope, err := k.Grant(declassify.KindName, kindapi.GrantContext{}, []byte(`{"drop":["`+InputTag+`"]}`))
	if err != nil {
		return nil, err
	}
	b := &Bench{k: k, specs: map[Guest]kernel.TaskSpec{}}
	for _, g := range Guests {
		wasm, err := Module(ctx, g)
		if err != nil {
			return nil, err
		}
		limits := kernel.Limits{Timeout: time.Minute}
		mod, err := eng.CompileWith(ctx, wasm, limits.CompileLimits())
		if err != nil {
			return nil, fmt.Errorf("lifecycle: compiling %s: %w", g, err)
		}
		spec := kernel.TaskSpec{
			Module:     mod,
			Principal:  "bench",
			Name:       string(g),
			Limits:     limits,
			Grants:     []kernel.GrantSpec{{Name: "d", Kind: declassify.KindName, Scope: scope}},
			Input:      []byte(Input),
			InputLabel: kindapi.NewLabel([]string{InputTag}, nil),
		}
		if g != GoCommand {
			spec.Entry = "run"
		}
		b.specs[g] = spec
		if g == GoReactor {
			b.idle = spec
			b.idle.Entry = "idle"
			b.idle.Limits.Timeout = time.Hour
		}
	}
	return b, nil
}

// Task runs one task of g: start, its capability call, its result,
// teardown. It fails unless the result is the input, declassified.
func (b *Bench) Task(ctx context.Context, g Guest) error {
	spec, ok := b.specs[g]
	if !ok {
		return fmt.Errorf("lifecycle: no guest %q", g)
	}
	t, err := b.k.Run(ctx, spec)
	if err != nil {
		if t != nil {
			err = fmt.Errorf("%w\n%s", err, t.Stderr().Data)
		}
		return fmt.Errorf("lifecycle: %s: %w", g, err)
	}
	res := t.ResultBlob()
	if res == nil || string(res.Bytes()) != Input || slices.Contains(res.Label().Conf(), InputTag) {
		return fmt.Errorf("lifecycle: %s: result %v, want the input without %s", g, res, InputTag)
	}
	return b.k.Forget(t)
}

// Result is what Run measured.
type Result struct {
	Tasks   int
	Workers int
	Wall    time.Duration
	// CPU is the process's CPU time over the run (every thread, the
	// garbage collector's included); zero where it can not be read.
	CPU time.Duration
}

// CPUPerTask is the CPU time per task.
func (r Result) CPUPerTask() time.Duration { return r.CPU / time.Duration(max(r.Tasks, 1)) }

// TasksPerSecond is how many tasks ended per second of wall time.
func (r Result) TasksPerSecond() float64 { return float64(r.Tasks) / r.Wall.Seconds() }

// Run runs n tasks of g on workers goroutines, each running one task after
// the other, and measures them.
func (b *Bench) Run(ctx context.Context, g Guest, n, workers int) (Result, error) {
	return Measure(n, workers, func() error { return b.Task(ctx, g) })
}

// Measure runs task n times on workers goroutines, each running one after
// the other, and measures them: the process's CPU time (zero where it
// cannot be read) and the wall time. The first error stops its worker and
// is returned.
func Measure(n, workers int, task func() error) (Result, error) {
	workers = max(workers, 1)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan struct{}, n)
	)
	for range n {
		next <- struct{}{}
	}
	close(next)
	cpu, start := cputime.Process(), time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				if err := task(); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	r := Result{Tasks: n, Workers: workers, Wall: time.Since(start), CPU: cputime.Process() - cpu}
	if cpu == 0 {
		r.CPU = 0
	}
	return r, first
}

// IdleRSS starts n tasks of the Go reactor at its entry "idle" (the Go
// runtime started, the guest asleep in poll_oneoff), waits until each has
// said it is ready, and returns by how many bytes the process's resident
// set grew per task, garbage collected and freed memory returned to the
// system before each reading; then it stops and forgets them. Zero where
// RSS can not be read.
func (b *Bench) IdleRSS(ctx context.Context, n int) (perTask float64, err error) {
	settle := func() int64 {
		runtime.GC()
		debug.FreeOSMemory()
		return RSS()
	}
	before := settle()
	tasks := make([]*kernel.Task, 0, n)
	defer func() {
		for _, t := range tasks {
			t.Kill()
		}
		for _, t := range tasks {
			t.Wait(ctx)
			b.k.Forget(t)
		}
	}()
	for range n {
		t, err := b.k.Start(ctx, b.idle)
		if err != nil {
			return 0, err
		}
		tasks = append(tasks, t)
	}
	deadline := time.Now().Add(time.Minute)
	for _, t := range tasks {
		for !bytes.Contains(t.Stdout().Data, []byte("ready")) {
			if t.Ended() || time.Now().After(deadline) {
				return 0, fmt.Errorf("lifecycle: idle task %s not ready (ended %t)\n%s", t.ID(), t.Ended(), t.Stderr().Data)
			}
			time.Sleep(time.Millisecond)
		}
	}
	after := settle()
	if before == 0 || after == 0 {
		return 0, nil
	}
	return float64(after-before) / float64(n), nil
}
